#pragma once
// Traffic for the fleet simulation (docs/fleet-simulator.md, "Traffic") from the Alibaba GenTD26
// serving data: per-container QPS series, the LoRA request trace (each checkpoint a distinct
// model) and the recorded load latencies that the cold-start model is set against.
//
//   qps.csv                       timestamp_anon,value,container_ip,request_type
//   lora_request_trace.csv        gmt_create,...,checkpoint_model_version_id,...
//   *_update_latency_anon.csv     timestamp_anon,value,container_ip   (value in ms)
//
// Each may be given as the .tar.gz GenTD26 publishes (read through `tar`). Every malformed row is
// an error naming the file, line and column.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "sim/serving_trace.h"

namespace tessera::sim {

// One QPS series per container_ip (rows of request_type `requestType` only; empty: all), every
// series on the time line of the file's first timestamp (held at 0 before a container's first
// sample).
Result<std::map<std::string, std::vector<QpsPoint>>> parseQpsByContainer(
    std::string_view text, const std::string& label, std::string_view requestType);
Result<std::map<std::string, std::vector<QpsPoint>>> readQpsByContainer(
    const std::string& path, std::string_view requestType);

// Request arrivals (seconds after the trace's first request) per checkpoint id.
struct LoraTrace {
  std::map<std::string, std::vector<double>> arrivals;  // sorted
  double spanSeconds = 0;                               // first to last request
  int withoutCheckpoint = 0;  // requests whose checkpoint id is empty (not in `arrivals`)
  // Checkpoint ids, the most requested first (ties by id).
  std::vector<std::string> byVolume() const;
};
Result<LoraTrace> parseLoraTrace(std::string_view text, const std::string& label);
Result<LoraTrace> readLoraTrace(const std::string& path);

// A request trace from arrival times: arrivals (seconds) compressed by `compress` (the trace's
// span x 1/compress), each request's token lengths those of a request drawn uniformly from
// `tokens`. Deterministic for a seed.
Result<ServingTrace> traceFromArrivals(const std::vector<double>& arrivals, double compress,
                                       const ServingTrace& tokens, std::uint64_t seed,
                                       std::string name);

// The `value` column of a latency file, in seconds (the file's values are milliseconds).
Result<std::vector<double>> readLatencySeconds(const std::string& path);

}  // namespace tessera::sim
