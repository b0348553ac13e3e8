#include "base/status.h"

#include <gtest/gtest.h>

#include "base/strings.h"

namespace daisy {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("%d is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  DAISY_ASSIGN_OR_RETURN(int half, Half(x));
  DAISY_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = DataLoss("truncated at offset %d", 24);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "DataLoss: truncated at offset 24");
  EXPECT_EQ(s.With("m.gguf").ToString(), "DataLoss: m.gguf: truncated at offset 24");
  EXPECT_EQ(Status::Ok().ToString(), "OK");
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(Quarter(8).value(), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

TEST(ResultDeathTest, ValueOfFailedResultAborts) {
  Result<int> r = Half(3);
  EXPECT_DEATH((void)r.value(), "3 is odd");
}

TEST(StringsTest, Helpers) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(3 * 1024 * 1024), "3.00 MiB");
  EXPECT_EQ(StrSplit("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(EscapeForMessage("a\x01", 8), "a\\x01");
}

}  // namespace
}  // namespace daisy
