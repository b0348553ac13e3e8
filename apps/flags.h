// Command lines (daisy's sub-commands, the benchmarks) go through this thin layer over CLI11
// instead of CLI11 itself. CLI11 2.1 is header-only and compiled in full by every file that
// includes it (~9 s of g++ and ~14 s of clang with the sanitizers, for each of a dozen files, in
// each of CI's three builds); behind this header it is compiled once, in flags.cc.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

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
  Flag InRange(int lo, int hi);
  Flag InRange(size_t lo, size_t hi);
  Flag InRange(double lo, double hi);
  Flag OneOf(std::initializer_list<const char*> values);
  Flag Delimiter(char c);  // a list's values may come in one argument, split at c
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
  // flags.cc for the value types the command lines use.
  template <typename T>
  Flag Option(const std::string& names, T& value, const std::string& help = "");
  // A flag that takes no value: true when given.
  Flag Switch(const std::string& names, bool& value, const std::string& help);

 private:
  friend class CommandLine;
  CLI::App* app_;
};

// A program's command line: its own flags and, optionally, sub-commands with theirs.
class CommandLine {
 public:
  explicit CommandLine(const std::string& description);
  ~CommandLine();

  Flags& flags() { return *root_; }
  // A sub-command with its own flags; once there is one, the command line must name one.
  Flags& AddCommand(const std::string& name, const std::string& help);
  // Parses argv: -1 to go on, else the exit code to end with now (--help printed: 0; a bad
  // command line explained on stderr: non-zero).
  int Parse(int argc, char** argv);
  // The sub-command the command line named (its index in the order added), or -1.
  int chosen() const;

 private:
  std::unique_ptr<CLI::App> app_;
  std::unique_ptr<Flags> root_;
  std::vector<std::unique_ptr<Flags>> commands_;
};

}  // namespace daisy::apps
