#include "scale/recommenders.h"
namespace tessera::scale {
Result<std::unique_ptr<Recommender>> makeKpaRecommender(const RecommenderArgs&) {
  return fail(Error::internal("kpa: not yet"));
}
}  // namespace tessera::scale
