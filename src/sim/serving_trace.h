#pragma once
// Request traces of LLM inference services, for the serving simulation (docs/serving-simulator.md):
//
//   Azure LLM inference 2023 (Splitwise)   CSV  TIMESTAMP,ContextTokens,GeneratedTokens
//       TIMESTAMP like "2023-11-16 18:15:46.6805900" (no zone; read as UTC, 100 ns digits kept
//       to the microsecond); the last line may lack its newline.
//   Mooncake FAST'25                       JSONL {"timestamp": ms, "input_length": n,
//                                                 "output_length": n, "hash_ids": [...]}
//
// Arrivals are microseconds after the trace's first request, multiplied by `timeScale` (0.5
// halves every inter-arrival time: twice the rate; 2 stretches them). Requests keep file order
// among equal times and are sorted by arrival otherwise. Every malformed line is an error
// naming the file, the line and the field; no row is skipped.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tessera::sim {

using Micros = std::int64_t;  // the serving simulation's time line, microseconds

// The most a serving simulation replays, after any time scale, and the most requests a shaped
// trace may hold. Public traces span hours to days; the simulation keeps a replica count per
// sync slot (15 s), so a span of years (a time scale of 1e6, say) would exhaust memory long
// before it ran. A month, and the fleet's request limit.
inline constexpr double kMaxServingSpanSeconds = 31.0 * 86'400;
inline constexpr double kMaxServingRequests = 2e7;
// Whether `spanSeconds` (what `what` spans) is one the simulation takes; the error names it.
Result<void> checkServingSpan(double spanSeconds, std::string_view what);

struct ServingRequest {
  Micros arrivalUs = 0;
  std::int32_t inputTokens = 0;   // prompt tokens
  std::int32_t outputTokens = 0;  // generated tokens as the trace says (may be 0)
  int line = 0;                   // line in the trace file (1-based), for messages
  // Mooncake: the prompt's prefix blocks (kMooncakeBlockTokens tokens each); equal ids are the
  // same tokens. Empty when the trace has none (Azure).
  std::vector<std::uint32_t> blockHashes = {};
};
inline constexpr int kMooncakeBlockTokens = 512;

enum class ServingTraceFormat { kAzure, kMooncake };

struct ServingTrace {
  std::string name;  // file name without directory and extension
  std::vector<ServingRequest> requests;
  Micros spanUs() const { return requests.empty() ? 0 : requests.back().arrivalUs; }
};

Result<ServingTrace> parseAzureLlmTrace(std::string_view text, std::string label,
                                        double timeScale = 1.0);
Result<ServingTrace> parseMooncakeTrace(std::string_view text, std::string label,
                                        double timeScale = 1.0);

// An arrival shape from a QPS series (Alibaba GenTD26 `qps.csv`: timestamp_anon,value,... per
// container; any CSV whose header names `timestamp_anon` or `timestamp` (seconds) and `value`):
// the values at one timestamp are summed (the service's total), in timestamp order. Every
// malformed row is an error naming the file, line and column.
struct QpsPoint {
  double timeS = 0;  // after the series' first timestamp
  double qps = 0;
};
Result<std::vector<QpsPoint>> parseQpsSeries(std::string_view text, const std::string& label);
// Reads a series from a CSV file, or from a .tar.gz holding one (as GenTD26 publishes it; read
// through `tar`).
Result<std::vector<QpsPoint>> readQpsSeries(const std::string& path);
// The text of a CSV file, or of the .csv member of a .tar.gz (read through `tar`).
Result<std::string> readCsvOrTarGz(const std::string& path);
// "2023-11-16 18:15:46.6805900" (or with a 'T'), optionally followed by a UTC offset (Z, ±HH,
// ±HHMM or ±HH:MM, as in the Azure 2024 traces' "2024-05-10 00:00:00.009930+00:00") ->
// microseconds since the epoch in UTC (read as UTC without an offset); fraction digits beyond
// the microsecond are truncated. False when it does not read as one.
bool parseDateTime(std::string_view s, Micros& out);

// A request trace shaped by a series: the series' time line stretched or compressed to
// spanSeconds (0: as recorded), its rate scaled so that the mean over that span is
// meanRatePerSec, and arrivals drawn as a Poisson process whose rate is the series' value,
// held from one point to the next. Each request's prompt and output lengths (and prefix
// blocks) are those of a request drawn uniformly from `tokens`. Deterministic for a seed.
struct QpsShapeOptions {
  double spanSeconds = 3600;
  double meanRatePerSec = 0;  // required, > 0
  std::uint64_t seed = 1;
};
Result<ServingTrace> shapeTrace(const std::vector<QpsPoint>& series, const ServingTrace& tokens,
                                const QpsShapeOptions& options, std::string name);

// A traffic shape the recorded traces lack, from one of them: every request's prompt and output
// lengths times `prompt` and `output` (both > 0), rounded, and at least 1 where the trace had
// one (an output the trace records as 0 stays 0). A prompt made shorter keeps the prefix blocks
// that still lie within it; one made longer keeps its blocks, the added tokens shared with none.
// Lengths beyond 10 million tokens are refused (no engine holds such a context); 1,1 leaves the
// trace as it was read.
Result<void> scaleTokenLengths(ServingTrace& trace, double prompt, double output);

// The trace `tessera simulate serving` replays when given none (a fresh clone has no public
// traces): one synthetic hour of a chat service, deterministic for a seed. Arrivals are a
// Poisson process whose rate follows a slow swell (3 to 7 requests/s over the hour) with a
// four-minute burst at twice the rate 40 minutes in; prompt and output lengths are log-normal
// (medians 700 and 180 tokens, capped at 16,000 and 2,000), shaped like the public chat traces.
inline constexpr double kBuiltinChatSpanSeconds = 3600;
ServingTrace builtinChatTrace(std::uint64_t seed = 1, double timeScale = 1.0);

// Reads a file; the format is given or, when empty, taken from the extension (.csv: Azure,
// .jsonl / .json: Mooncake).
Result<ServingTraceFormat> servingTraceFormatOf(std::string_view path);
Result<ServingTrace> readServingTrace(const std::string& path, ServingTraceFormat format,
                                      double timeScale = 1.0);

}  // namespace tessera::sim
