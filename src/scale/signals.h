#pragma once
// What the autoscaler sees of one deployment: per-replica signals as serving engines export
// them, and deployment-wide rates. The same structs are filled by the serving simulator now
// and by the server's scraper later, so every field names the engine metric it comes from.
//
// clang-format off
//   field            vLLM                         Triton                               TGI
//   waiting          vllm:num_requests_waiting    nv_inference_pending_request_count   tgi_queue_size
//   running          vllm:num_requests_running    (in-flight executions)               tgi_batch_current_size
//   kvCacheUsage     vllm:kv_cache_usage_perc     —                                    —
//   gpuUtilization   DCGM_FI_DEV_GPU_UTIL / 100 or nv_gpu_utilization (0..1)
//   computeActive    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE averaged over the window (0..1; per MIG
//                    instance, per process under MPS)
//   prefillsPerSec   rate of vllm:request_prefill_time_seconds_count over the same window
//   ttft / tpot      vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds
//   meanPrefillMs    vllm:request_prefill_time_seconds (rate of _sum / rate of _count)
//   prefillP99Ms     the same histogram's 0.99 quantile over the window
// clang-format on
//
// A metric a replica did not report is std::nullopt ("missing" in HPA terms), never 0.
// Units: times in milliseconds on the Clock's time line, ratios in 0..1, rates per second.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace tessera::scale {

enum class ReplicaPhase {
  kLoading,   // placed, weights loading; not serving yet
  kReady,     // serving
  kDraining,  // no new requests; finishing in-flight ones (never counted as capacity)
};

struct ReplicaSignals {
  std::string id;
  ReplicaPhase phase = ReplicaPhase::kReady;
  Millis createdMs = 0;  // when the replica was asked for (newest = largest)
  // kLoading only: when it is expected to serve, from the loader's measured bandwidth and the
  // model's size (the node agent reports it; the simulator computes it).
  std::optional<Millis> expectedReadyMs;
  int priority = 0;          // higher = more important (scale-down removes lowest first)
  int maxConcurrency = 0;    // sequences it can run at once (KV-cache bound); 0 = unknown
  double gpuFraction = 1.0;  // GPU share it holds (1 = a whole GPU), for GPU-hour accounting
  // Asked for but not placed yet (no GPU fits it now): capacity on its way to the
  // recommenders, nothing to drain or count as placed to the reconciler (scale/reconcile.h).
  bool unplaced = false;

  std::optional<double> waiting;         // queued requests
  std::optional<double> running;         // requests being served
  std::optional<double> kvCacheUsage;    // 0..1
  std::optional<double> gpuUtilization;  // 0..1
  // Share of the window the replica's compute units (tensor pipes) were working, relative to
  // the GPU share it holds, and the prompts it prefilled per second over the same window.
  // Prefill is compute-bound and decode memory-bound, so their ratio is a prompt's own work on
  // the replica, where the measured prefill time counts the whole engine step every prompt of
  // a batch shared (scale/tessera.cc).
  std::optional<double> computeActive;   // 0..1
  std::optional<double> prefillsPerSec;  // >= 0
};

struct DeploymentSignals {
  Millis nowMs = 0;
  std::vector<ReplicaSignals> replicas;
  // Over the recommender's observation window; nullopt when not measured.
  std::optional<double> arrivalRatePerSec;  // requests arriving per second
  // Requests held in front of the replicas (a router or activator buffer, e.g. while no
  // replica is ready), not in any replica's `waiting`; nullopt when there is no such buffer.
  std::optional<double> bufferedRequests;
  std::optional<double> meanServiceMs;  // mean time a request spends being served
  std::optional<double> ttftP99Ms;      // time to first token, p99
  std::optional<double> tpotMs;         // time per output token, mean
  // Mean prefill time of the requests that got their first token in the window: from the
  // request's first scheduling to its first token (vLLM `vllm:request_prefill_time_seconds`,
  // its histogram's _sum / _count over the window). λ × meanPrefillMs is the share of a
  // replica's time the deployment's prompts occupy: what a prefill-bound deployment is sized by.
  std::optional<double> meanPrefillMs;
  // The same histogram's 99th percentile over the window: the long prompts a GPU share
  // stretches (scale/reconcile.h's share rule keeps them within the TTFT target).
  std::optional<double> prefillP99Ms;
};

}  // namespace tessera::scale
