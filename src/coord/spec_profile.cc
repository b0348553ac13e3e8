#include "coord/spec_profile.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "base/log.h"

namespace daisy::coord {
namespace {

constexpr const char* kFormat = "daisy-spec-profile";
constexpr int kVersion = 1;

using nlohmann::json;

// A number at `key` of `j`, finite and at least 0.
Result<double> Number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
    return DataLoss("'%s' is missing or not a number of 0 or more", key);
  }
  return it->get<double>();
}

// `n` numbers at `key` of `j` (n < 0: any count up to `most`), each finite and at least 0.
Status Numbers(const json& j, const char* key, int n, size_t most, std::vector<double>& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || (n >= 0 && it->size() != static_cast<size_t>(n)) || it->size() > most) {
    return DataLoss("'%s' is missing or not a list of %s numbers", key,
                    n >= 0 ? std::to_string(n).c_str() : ("at most " + std::to_string(most)).c_str());
  }
  out.clear();
  for (const json& v : *it) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      return DataLoss("'%s' holds something other than a number of 0 or more", key);
    }
    out.push_back(v.get<double>());
  }
  return Status::Ok();
}

Result<KController::Learned> Parse(const json& j, std::string& pair) {
  using L = KController::Learned;
  L l;
  auto str = [&](const char* key) -> const json* {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? &*it : nullptr;
  };
  const json* format = str("format");
  if (!j.is_object() || format == nullptr || format->get<std::string>() != kFormat) {
    return DataLoss("not a daisy speculative-decoding profile (no \"format\": \"%s\")", kFormat);
  }
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != kVersion) {
    return DataLoss("a profile of another version (this daisy reads version %d)", kVersion);
  }
  const json* p = str("pair");
  if (p == nullptr) return DataLoss("'pair' is missing");
  pair = p->get<std::string>();
  double v;
  DAISY_ASSIGN_OR_RETURN(v, Number(j, "fixed_k"));
  l.fixed_k = static_cast<int>(std::min(v, 1e6));
  DAISY_ASSIGN_OR_RETURN(v, Number(j, "k_max"));
  l.k_max = static_cast<int>(std::min(v, 1e6));
  DAISY_ASSIGN_OR_RETURN(v, Number(j, "k"));
  l.k = static_cast<int>(std::min(v, 1e6));
  DAISY_ASSIGN_OR_RETURN(l.alpha, Number(j, "acceptance"));
  if (l.alpha > 1) return DataLoss("'acceptance' is above 1");
  std::vector<double> s, t;
  DAISY_RETURN_IF_ERROR(Numbers(j, "state_taken", 2, 2, s));
  DAISY_RETURN_IF_ERROR(Numbers(j, "state_tried", 2, 2, t));
  for (int i = 0; i < 2; ++i) {
    if (s[i] > t[i]) return DataLoss("'state_taken' exceeds 'state_tried'");
    l.state_successes[i] = s[i], l.state_trials[i] = t[i];
  }
  constexpr int kBins = KController::kConfidenceBins;
  DAISY_RETURN_IF_ERROR(Numbers(j, "confidence_taken", kBins, kBins, s));
  DAISY_RETURN_IF_ERROR(Numbers(j, "confidence_tried", kBins, kBins, t));
  for (int i = 0; i < kBins; ++i) {
    if (s[i] > t[i]) return DataLoss("'confidence_taken' exceeds 'confidence_tried'");
    l.conf_successes[i] = s[i], l.conf_trials[i] = t[i];
  }
  DAISY_RETURN_IF_ERROR(Numbers(j, "verify_ms", -1, 4096, l.verify_seconds));
  for (double& ms : l.verify_seconds) ms /= 1000;
  DAISY_ASSIGN_OR_RETURN(l.draft_seconds, Number(j, "draft_ms"));
  l.draft_seconds /= 1000;
  return l;
}

}  // namespace

Result<bool> LoadSpecProfile(const std::string& path, const std::string& pair, KController& k) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    DAISY_LOG_INFO("--spec-profile %s: no profile yet; this run learns the pair from the start and saves it",
                   path.c_str());
    return false;
  }
  const auto fail = [&](const Status& s) {
    return Status(s.code(), "--spec-profile " + path + ": " + s.message() +
                                " (give another file, or delete this one to start a new profile)");
  };
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return fail(IoError("cannot read it: %s", ec.message().c_str()));
  if (size > kMaxSpecProfileBytes) {
    return fail(DataLoss("%ju bytes, more than a profile's %zu", size, kMaxSpecProfileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return fail(IoError("cannot read it"));
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail(DataLoss("not JSON, so not a daisy speculative-decoding profile"));
  std::string saved_pair;
  auto learned = Parse(j, saved_pair);
  if (!learned.ok()) return fail(learned.status());
  if (saved_pair != pair) {
    DAISY_LOG_WARN("--spec-profile %s is for another pair (%s; this run: %s): starting without it, and "
                   "replacing it at the end", path.c_str(), saved_pair.c_str(), pair.c_str());
    return false;
  }
  if (!k.Restore(*learned)) {
    DAISY_LOG_WARN("--spec-profile %s was saved with --spec-k %d --spec-k-max %d: starting "
                   "without it, and replacing it at the end", path.c_str(), learned->fixed_k, learned->k_max);
    return false;
  }
  DAISY_LOG_INFO("--spec-profile %s: starting from acceptance %.0f%%, K %d", path.c_str(), 100 * learned->alpha,
                 learned->k);
  return true;
}

Status SaveSpecProfile(const std::string& path, const std::string& pair, const KController& k) {
  const KController::Learned l = k.Export();
  const auto list = [](const double* v, int n) { return std::vector<double>(v, v + n); };
  std::vector<double> verify_ms;
  for (double s : l.verify_seconds) verify_ms.push_back(s * 1000);
  constexpr int kBins = KController::kConfidenceBins;
  const json j = {{"format", kFormat},
                  {"version", kVersion},
                  {"pair", pair},
                  {"fixed_k", l.fixed_k},
                  {"k_max", l.k_max},
                  {"k", l.k},
                  {"acceptance", l.alpha},
                  {"state_taken", list(l.state_successes, 2)},
                  {"state_tried", list(l.state_trials, 2)},
                  {"confidence_taken", list(l.conf_successes, kBins)},
                  {"confidence_tried", list(l.conf_trials, kBins)},
                  {"verify_ms", verify_ms},
                  {"draft_ms", l.draft_seconds * 1000}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(1) << "\n";
    out.close();
    if (!out) return IoError("--spec-profile %s: cannot write %s", path.c_str(), tmp.c_str());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return IoError("--spec-profile %s: cannot replace it: %s", path.c_str(), ec.message().c_str());
  }
  return Status::Ok();
}

}  // namespace daisy::coord
