// The one file that compiles CLI11 (flags.h says why).
#include "apps/flags.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <utility>

namespace daisy::apps {

Flag Flag::ShowDefault() {
  option_->capture_default_str();
  return *this;
}

Flag Flag::Required() {
  option_->required();
  return *this;
}

Flag Flag::InRange(int lo, int hi) {
  option_->check(CLI::Range(lo, hi));
  return *this;
}

Flag Flag::InRange(size_t lo, size_t hi) {
  option_->check(CLI::Range(lo, hi));
  return *this;
}

Flag Flag::InRange(double lo, double hi) {
  option_->check(CLI::Range(lo, hi));
  return *this;
}

Flag Flag::OneOf(std::initializer_list<const char*> values) {
  option_->check(CLI::IsMember(std::vector<std::string>(values.begin(), values.end())));
  return *this;
}

Flag Flag::Delimiter(char c) {
  option_->delimiter(c);
  return *this;
}

Flag Flag::Each(std::function<void(const std::string&)> fn) {
  option_->each(std::move(fn));
  return *this;
}

bool Flag::Given() const { return option_ != nullptr && option_->count() > 0; }

template <typename T>
Flag Flags::Option(const std::string& names, T& value, const std::string& help) {
  return Flag(app_->add_option(names, value, help));
}

Flag Flags::Switch(const std::string& names, bool& value, const std::string& help) {
  return Flag(app_->add_flag(names, value, help));
}

// The value types the command lines' flags have.
template Flag Flags::Option(const std::string&, std::string&, const std::string&);
template Flag Flags::Option(const std::string&, int&, const std::string&);
template Flag Flags::Option(const std::string&, int64_t&, const std::string&);
template Flag Flags::Option(const std::string&, size_t&, const std::string&);
template Flag Flags::Option(const std::string&, float&, const std::string&);
template Flag Flags::Option(const std::string&, double&, const std::string&);
template Flag Flags::Option(const std::string&, std::vector<std::string>&, const std::string&);
template Flag Flags::Option(const std::string&, std::vector<double>&, const std::string&);

CommandLine::CommandLine(const std::string& description)
    : app_(std::make_unique<CLI::App>(description)), root_(std::make_unique<Flags>(*app_)) {}

CommandLine::~CommandLine() = default;

Flags& CommandLine::AddCommand(const std::string& name, const std::string& help) {
  app_->require_subcommand(1);
  commands_.push_back(std::make_unique<Flags>(*app_->add_subcommand(name, help)));
  return *commands_.back();
}

int CommandLine::Parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app_->exit(e);
  }
  return -1;
}

int CommandLine::chosen() const {
  for (size_t i = 0; i < commands_.size(); ++i) {
    if (commands_[i]->app_->parsed()) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace daisy::apps
