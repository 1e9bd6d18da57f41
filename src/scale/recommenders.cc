// makeRecommender: the table of built-in recommenders.

#include "scale/recommenders.h"

#include <algorithm>

namespace tessera::scale {
namespace {

using Factory = Result<std::unique_ptr<Recommender>> (*)(const RecommenderArgs&);

struct Entry {
  std::string_view name;
  Factory factory;
};

constexpr Entry kRecommenders[] = {
    {"hpa", &makeHpaRecommender},
    {"kpa", &makeKpaRecommender},
    {"littles-law", &makeLittlesLawRecommender},
    {"tessera", &makeTesseraRecommender},
    {"weighted", &makeWeightedRecommender},
};

}  // namespace

std::vector<std::string> recommenderNames() {
  std::vector<std::string> names;
  for (const Entry& e : kRecommenders) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::unique_ptr<Recommender>> makeRecommender(std::string_view name,
                                                     const RecommenderArgs& args) {
  for (const Entry& e : kRecommenders) {
    if (e.name == name) return e.factory(args);
  }
  std::string known;
  for (const std::string& n : recommenderNames()) known += (known.empty() ? "" : ", ") + n;
  return fail(
      Error::notFound("unknown recommender '" + std::string(name) + "' (known: " + known + ")"));
}

}  // namespace tessera::scale
