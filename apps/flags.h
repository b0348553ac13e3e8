// The sub-commands register their flags through this thin layer over CLI11 instead of CLI11
// itself. CLI11 2.1 is header-only and compiled in full by every file that includes it (~9 s of
// g++ and ~14 s of clang with the sanitizers, for each of a dozen files, in each of CI's three
// builds); behind this header it is compiled once, in daisy.cc.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace daisy::apps {

// One registered flag; the setters chain like CLI11's.
class Flag {
 public:
  Flag() = default;
  explicit Flag(CLI::Option* option) : option_(option) {}

  Flag ShowDefault();  // --help shows the value the flag starts with
  Flag Required();
  Flag InRange(double lo, double hi);
  Flag InRange(size_t lo, size_t hi);
  Flag OneOf(std::initializer_list<const char*> values);
  // `fn` runs on each value given (a flag that may repeat runs it each time).
  Flag Each(std::function<void(const std::string&)> fn);
  // Whether the command line gave it (after parsing); false for a default-constructed Flag.
  bool Given() const;

 private:
  CLI::Option* option_ = nullptr;
};

// A (sub-)command's flags.
class Flags {
 public:
  explicit Flags(CLI::App& app) : app_(&app) {}

  // "-m,--model" style names; a name without dashes is a positional argument. Instantiated in
  // daisy.cc for the value types the commands use.
  template <typename T>
  Flag Option(const std::string& names, T& value, const std::string& help);
  // A flag that takes no value: true when given.
  Flag Switch(const std::string& names, bool& value, const std::string& help);

 private:
  CLI::App* app_;
};

}  // namespace daisy::apps
