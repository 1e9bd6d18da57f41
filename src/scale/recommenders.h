#pragma once
// Factories of the built-in recommenders, one per file; makeRecommender (recommenders.cc)
// dispatches on the name. Each documents its arguments and formula above its factory, and
// docs/autoscaling.md collects them. Internal to the scale module: callers use
// makeRecommender.

#include <memory>

#include "common/result.h"
#include "scale/args.h"
#include "scale/autoscaler.h"

namespace tessera::scale {

Result<std::unique_ptr<Recommender>> makeHpaRecommender(const RecommenderArgs& args);
Result<std::unique_ptr<Recommender>> makeWeightedRecommender(const RecommenderArgs& args);
Result<std::unique_ptr<Recommender>> makeLittlesLawRecommender(const RecommenderArgs& args);
Result<std::unique_ptr<Recommender>> makeKpaRecommender(const RecommenderArgs& args);
Result<std::unique_ptr<Recommender>> makeTesseraRecommender(const RecommenderArgs& args);

}  // namespace tessera::scale
