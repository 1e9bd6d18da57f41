#pragma once
// Flag readers and trace loading shared by `simulate serving`, `simulate serving-matrix` and
// `simulate replica` (defined in cmd_simulate_serving.cc).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sim/serving_run.h"
#include "sim/serving_trace.h"

namespace tessera::cli {

// The help of --router-queue-depth, which `simulate serving` and `serving-matrix` share.
inline constexpr const char* kRouterQueueDepthHelp =
    "Experiment: the router holds requests while every ready replica has this many waiting, and "
    "sends them in arrival order as replicas free up (the Gateway API inference extension's flow "
    "control; its default is 5). 0: each request goes to a replica on arrival";

// `text` read whole as a number (std::stod's syntax); nullopt when it is not one.
std::optional<double> number(const std::string& text);
// A comma-separated list of finite numbers > 0; errors name `flag`.
Result<std::vector<double>> positiveList(const std::string& text, const std::string& flag);
// A comma-separated list, empty items dropped.
std::vector<std::string> splitList(const std::string& text);
// "P,D,C": actual prefill speed, decode speed and cold-start time as multiples of the model's.
Result<sim::ModelError> parseModelError(const std::string& text, const char* flag);
// --token-scale PROMPT,OUTPUT: the two length multiples, each > 0.
Result<std::pair<double, double>> parseTokenScale(const std::string& text);
// The help of --token-scale, which `simulate serving` and `serving-matrix` share.
inline constexpr const char* kTokenScaleHelp =
    "Experiment: a traffic shape the traces lack, every request's PROMPT,OUTPUT lengths times "
    "these (1,10: long generated answers, decode-bound; 2,0.125: long prompts and short "
    "answers, like code completion)";
// --policy-arg POLICY.KEY=NUMBER values: an autoscaled policy's setting each.
Result<std::vector<sim::ServingOptions::PolicySetting>> parsePolicyArgs(
    const std::vector<std::string>& texts);
// The help of --policy-arg, which `simulate serving` and `serving-matrix` share.
inline constexpr const char* kPolicyArgHelp =
    "Experiment: change an autoscaled policy's setting, POLICY.KEY=VALUE (a recommender "
    "argument, or minReplicas, maxReplicas, warmReplicas, syncPeriodSeconds, "
    "scaleUpWindowSeconds, scaleDownWindowSeconds, scaleDownPercent, scaleDownPeriodSeconds); "
    "repeatable";

// An Azure or Mooncake trace, the format given or taken from the extension.
Result<sim::ServingTrace> readTrace(const std::string& path,
                                    const std::optional<std::string>& format, double timeScale);
// Requests per second over the trace's span.
double meanRate(const sim::ServingTrace& t);
// A QPS series (CSV or .tar.gz) shaped into requests whose lengths come from `tokens`.
Result<sim::ServingTrace> qpsTrace(const std::string& seriesPath, const sim::ServingTrace& tokens,
                                   double meanRatePerSec, double spanSeconds, std::uint64_t seed,
                                   std::string name);

}  // namespace tessera::cli
