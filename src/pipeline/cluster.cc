#include "pipeline/cluster.h"

#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "base/strings.h"
#include "pipeline/protocol.h"
#include "transport/net.h"

namespace daisy::pipeline {
namespace {

constexpr size_t kMaxClusterFile = size_t{1} << 20;  // a cluster file is a few lines
constexpr size_t kMaxStages = 256;

std::string Where(const std::string& file, const toml::node& node) {
  const toml::source_position p = node.source().begin;
  return StrFormat("%s:%u", file.c_str(), static_cast<unsigned>(p.line));
}

// Resolves `value` against the directory of the cluster file.
std::string Resolve(const std::filesystem::path& file, const std::string& value) {
  std::filesystem::path p(value);
  if (p.is_absolute()) return value;
  return (file.parent_path() / p).lexically_normal().string();
}

Status CheckKeys(const std::string& file, const toml::table& table, const std::set<std::string>& known,
                 const char* what) {
  for (const auto& [key, node] : table) {
    if (known.count(std::string(key.str())) == 0) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument("%s: unknown key '%s' in %s (known: %s)", Where(file, node).c_str(),
                             std::string(key.str()).c_str(), what, list.c_str());
    }
  }
  return Status::Ok();
}

Result<std::string> String(const std::string& file, const toml::table& table, const char* key) {
  const toml::node* n = table.get(key);
  if (n == nullptr) return std::string();
  if (!n->is_string()) return InvalidArgument("%s: %s must be a string", Where(file, *n).c_str(), key);
  std::string v = **n->as_string();
  if (v.empty()) return InvalidArgument("%s: %s is empty", Where(file, *n).c_str(), key);
  return v;
}

}  // namespace

std::vector<std::string> ClusterFile::LocalShards() const {
  std::vector<std::string> out;
  for (const ClusterStage& s : stages) {
    if (s.address.empty()) out.push_back(s.shard);
  }
  return out;
}

std::string ClusterFile::Workers() const {
  std::string out;
  for (const ClusterStage& s : stages) {
    if (s.address.empty()) continue;
    out += (out.empty() ? "" : ",") + s.address;
    for (const std::string& b : s.standby) out += "|" + b;
  }
  return out;
}

Result<ClusterFile> ParseClusterFile(const std::string& text, const std::filesystem::path& path) {
  const std::string file = path.string();
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    return InvalidArgument("%s:%u: not valid TOML: %s", file.c_str(),
                           static_cast<unsigned>(e.source().begin.line),
                           std::string(e.description()).c_str());
  }
  DAISY_RETURN_IF_ERROR(CheckKeys(file, root,
                                  {"key_file", "tls", "wire", "connect_timeout", "peer_timeout", "forward_timeout", "stage"},
                                  "the cluster file"));
  ClusterFile c;
  c.path = file;
  DAISY_ASSIGN_OR_RETURN(std::string key, String(file, root, "key_file"));
  if (!key.empty()) c.key_file = Resolve(path, key);
  if (const toml::node* t = root.get("tls"); t != nullptr) {
    if (!t->is_boolean()) return InvalidArgument("%s: tls must be true or false", Where(file, *t).c_str());
    c.tls = t->value<bool>().value_or(false);
    if (c.tls && c.key_file.empty()) {
      return InvalidArgument("%s: tls = true needs key_file (TLS is keyed by the cluster key)", Where(file, *t).c_str());
    }
  }
  DAISY_ASSIGN_OR_RETURN(std::string wire, String(file, root, "wire"));
  if (!wire.empty()) {
    auto w = ParseWireType(wire);
    if (!w.ok()) return w.status().With(Where(file, *root.get("wire")) + ": wire");
    c.wire = wire;
  }
  for (auto [name, field] : {std::pair{"connect_timeout", &c.connect_timeout}, std::pair{"peer_timeout", &c.peer_timeout},
                             std::pair{"forward_timeout", &c.forward_timeout}}) {
    const toml::node* t = root.get(name);
    if (t == nullptr) continue;
    if (!t->is_number()) {
      return InvalidArgument("%s: %s must be a number of seconds", Where(file, *t).c_str(), name);
    }
    const double v = t->value<double>().value_or(-1);
    if (!(v >= 0 && v <= 86400)) {
      return InvalidArgument("%s: %s %g is outside 0..86400 seconds", Where(file, *t).c_str(), name, v);
    }
    *field = v;
  }
  const toml::node* stages = root.get("stage");
  if (stages == nullptr || !stages->is_array_of_tables() || stages->as_array()->empty()) {
    return InvalidArgument("%s: no [[stage]] tables: list the pipeline's stages in order, stage 0 "
                           "first", file.c_str());
  }
  const toml::array& list = *stages->as_array();
  if (list.size() > kMaxStages) {
    return InvalidArgument("%s: %zu stages; at most %zu", file.c_str(), list.size(), kMaxStages);
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const toml::table& t = *list[i].as_table();
    const std::string where = Where(file, t) + ": stage " + std::to_string(i);
    DAISY_RETURN_IF_ERROR(CheckKeys(file, t, {"shard", "address", "listen", "standby"}, ("stage " + std::to_string(i)).c_str()));
    ClusterStage s;
    DAISY_ASSIGN_OR_RETURN(s.shard, String(file, t, "shard"));
    DAISY_ASSIGN_OR_RETURN(s.address, String(file, t, "address"));
    DAISY_ASSIGN_OR_RETURN(s.listen, String(file, t, "listen"));
    if (!s.shard.empty()) s.shard = Resolve(path, s.shard);
    if (const toml::node* sb = t.get("standby"); sb != nullptr) {
      const toml::array* arr = sb->as_array();
      if (arr == nullptr || arr->size() > 16) {
        return InvalidArgument("%s: standby must be a list of at most 16 \"HOST:PORT\" strings", where.c_str());
      }
      for (const toml::node& e : *arr) {
        const auto* v = e.as_string();
        if (v == nullptr) return InvalidArgument("%s: standby must be a list of \"HOST:PORT\" strings", where.c_str());
        auto hp = transport::ParseHostPort(v->get());
        if (!hp.ok()) return hp.status().With(where + ": standby");
        s.standby.push_back(v->get());
      }
      if (s.address.empty() && !s.standby.empty()) return InvalidArgument("%s: standby without address", where.c_str());
    }
    if (s.address.empty()) {
      if (!s.listen.empty()) return InvalidArgument("%s: listen without address", where.c_str());
      if (s.shard.empty()) return InvalidArgument("%s: needs a shard (it runs in the coordinator)", where.c_str());
      if (i > 0 && !c.stages.back().address.empty()) {
        return InvalidArgument("%s: has no address, but stage %zu before it is a worker; the "
                               "coordinator's stages come first", where.c_str(), i - 1);
      }
    } else {
      if (i == 0) {
        return InvalidArgument("%s: stage 0 has an address, but the coordinator runs stage 0 (the "
                               "tokenizer and embeddings): drop its address", where.c_str());
      }
      auto hp = transport::ParseHostPort(s.address);
      if (!hp.ok()) return hp.status().With(where + ": address");
      if (s.listen.empty()) s.listen = s.address;
      auto lp = transport::ParseHostPort(s.listen);
      if (!lp.ok()) return lp.status().With(where + ": listen");
    }
    c.stages.push_back(std::move(s));
  }
  return c;
}

Result<ClusterFile> LoadClusterFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open cluster file %s", path.c_str());
  std::string text;
  text.resize(kMaxClusterFile + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxClusterFile) {
    return InvalidArgument("%s: larger than %zu bytes; is this a cluster file?", path.c_str(), kMaxClusterFile);
  }
  return ParseClusterFile(text, path);
}

}  // namespace daisy::pipeline
