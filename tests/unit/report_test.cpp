// Specification of the report writers: CRC-32C, TFRecord framing of TensorBoard events, CSV, and
// how every text output prints a number (Real).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/real.h"
#include "common/crc32c.h"
#include "report/csv_writer.h"
#include "report/tensorboard_writer.h"
#include "tensorboard/event.pb.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using testing::ReadText;
using testing::TempDir;

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32c, ExtendsOverPiecesAsOverTheWhole) {
  EXPECT_EQ(Crc32cExtend(Crc32c("1234", 4), "56789", 5), 0xe3069283u);
  EXPECT_EQ(Crc32cExtend(0, "123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32cExtend(Crc32c("123456789", 9), "", 0), 0xe3069283u);
}

uint64_t LittleEndian(const std::string& bytes, size_t offset, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[offset + static_cast<size_t>(i)]);
  return value;
}

// Parses a TFRecord stream, checking both CRCs of every record.
std::vector<tensorboard::Event> ReadEvents(const std::string& path) {
  const std::string bytes = ReadText(path);
  std::vector<tensorboard::Event> events;
  size_t offset = 0;
  while (offset < bytes.size()) {
    const uint64_t length = LittleEndian(bytes, offset, 8);
    EXPECT_EQ(LittleEndian(bytes, offset + 8, 4), MaskedCrc32c(bytes.data() + offset, 8));
    const std::string payload = bytes.substr(offset + 12, length);
    EXPECT_EQ(LittleEndian(bytes, offset + 12 + length, 4), MaskedCrc32c(payload.data(), payload.size()));
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(payload));
    events.push_back(event);
    offset += 12 + length + 4;
  }
  EXPECT_EQ(offset, bytes.size());
  return events;
}

TEST(TensorBoardWriter, WritesAVersionHeaderThenScalarEvents) {
  TempDir dir;
  std::string path;
  {
    TensorBoardWriter writer(dir.path());
    writer.AddScalar("train/loss", 0.5, 10);
    writer.AddScalar("test/accuracy", 87.25, 20);
    path = writer.path();
  }
  EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos);
  std::vector<tensorboard::Event> events = ReadEvents(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 10);
  EXPECT_EQ(events[1].summary().value(0).tag(), "train/loss");
  EXPECT_FLOAT_EQ(events[1].summary().value(0).simple_value(), 0.5f);
  EXPECT_FLOAT_EQ(events[2].summary().value(0).simple_value(), 87.25f);
  EXPECT_GT(events[2].wall_time(), 1.6e9);
}

TEST(CsvWriter, WritesHeaderRowsAndQuotesWhenNeeded) {
  TempDir dir;
  {
    CsvWriter csv(dir / "m.csv", {"step", "note"});
    csv.AppendRow({"1", "plain"});
    csv.AppendRow({"2", "has,comma \"q\""});
    EXPECT_THROW(csv.AppendRow({"3"}), std::invalid_argument);
  }
  EXPECT_EQ(ReadText(dir / "m.csv"), "step,note\n1,plain\n2,\"has,comma \"\"q\"\"\"\n");
  EXPECT_EQ(CsvWriter::Number(0.25), "0.25");
  EXPECT_EQ(CsvWriter::Number(std::nan("")), "nan");
}

TEST(Real, PrintsEveryNanAsNanWhateverItsSignBit) {
  // x86's default NaN (0 * inf, inf - inf) has its sign bit set; which one a kernel makes
  // depends on the CPU's code path, and fmt would print it as "-nan".
  const double negative_nan = std::copysign(std::numeric_limits<double>::quiet_NaN(), -1.0);
  ASSERT_TRUE(std::signbit(negative_nan));
  EXPECT_EQ(fmt::format("{}", Real{negative_nan}), "nan");
  EXPECT_EQ(fmt::format("{:.4f}", Real{negative_nan}), "nan");
  EXPECT_EQ(fmt::format("{}", Real{std::numeric_limits<double>::quiet_NaN()}), "nan");
  EXPECT_EQ(CsvWriter::Number(negative_nan), "nan");
}

TEST(Real, KeepsTheSignOfInfinitiesAndFormatsOtherValuesAsADouble) {
  EXPECT_EQ(fmt::format("{}", Real{-std::numeric_limits<double>::infinity()}), "-inf");
  EXPECT_EQ(fmt::format("{}", Real{std::numeric_limits<double>::infinity()}), "inf");
  EXPECT_EQ(fmt::format("{:.4f}", Real{-0.125}), "-0.1250");
  EXPECT_EQ(fmt::format("{:>8.2f}|", Real{3.14159}), "    3.14|");
  EXPECT_EQ(fmt::format("{}", Real{1e-7}), fmt::format("{}", 1e-7));
}

}  // namespace
}  // namespace mgpu
