#include "scale/recommenders.h"
namespace tessera::scale {
Result<std::unique_ptr<Recommender>> makeTesseraRecommender(const RecommenderArgs& args) {
  return makeHpaRecommender(args);
}
}  // namespace tessera::scale
