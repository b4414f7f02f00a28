// RunSummary: summary.json's typed record, written and read by one field list.
#include <cmath>

#include <gtest/gtest.h>

#include "report/run_summary.h"

namespace mgpu {
namespace {

RunSummary FinishedRun() {
  RunSummary s;
  s.name = "lenet-ddp-fp32";
  s.status = "ok";
  s.model = "lenet";
  s.mode = "ddp";
  s.world_size = 2;
  s.total_seconds = 3.25;
  s.steps = 40;
  s.test_accuracy = 86.19;
  s.param_checksum = 2741.391253;
  s.rank_param_checksums = std::vector<double>{2741.391253, 2741.391253};
  s.class_names = std::vector<std::string>{"cat", "dog"};
  s.per_class_accuracy = {90.0, 82.5};
  s.peak_memory_bytes = {1 << 20, 1 << 21};
  s.cuda_graphs = CudaGraphsRecord{true, 37, 3};
  s.gpu_decode = GpuDecodeRecord{100, 7, 2, {{"progressive", 2}}};
  s.interrupted = InterruptionRecord{"SIGTERM", 15, 1, 40, "runs/x/checkpoints/step-40.ckpt"};
  EpochRecord epoch;
  epoch.epoch = 0;
  epoch.train_loss = 0.51;
  epoch.images_per_second = 23226;
  epoch.phase_seconds = {{"forward", 0.5}, {"collectives_total", 0.25}};
  s.epochs_detail = {epoch};
  s.launcher = nlohmann::json{{"nnodes", 1}};
  return s;
}

TEST(RunSummary, WhatIsWrittenReadsBackToTheSameRecord) {
  const nlohmann::json written = FinishedRun().ToJson();
  const nlohmann::json again = RunSummaryFromJson(nlohmann::json::parse(written.dump())).ToJson();
  EXPECT_EQ(again.dump(), written.dump()) << "compared as text: NaN (an unset epoch number) is written null";
  EXPECT_EQ(written["epochs_detail"][0]["phase_seconds"]["collectives_total"], 0.25);
  EXPECT_EQ(written["interrupted"]["signal_number"], 15);
  EXPECT_EQ(written["gpu_decode"]["fallback_reasons"]["progressive"], 2);
}

TEST(RunSummary, FieldsOfEveryRunAreNullUntilKnownAndOthersAreLeftOut) {
  const nlohmann::json fresh = RunSummary{}.ToJson();
  EXPECT_EQ(fresh["status"], "failed") << "a run that never got further failed";
  for (const char* always : {"test_accuracy", "test_loss", "param_checksum", "data_loading", "decode",
                             "train_samples", "test_samples", "total_seconds"}) {
    ASSERT_TRUE(fresh.contains(always)) << always;
    EXPECT_TRUE(fresh[always].is_null()) << always;
  }
  for (const char* sometimes : {"exit_code", "interrupted", "rank_param_checksums", "cuda_graphs", "gpu_decode",
                                "dp_timing", "launcher", "resumed_from", "checkpoint_file", "eval_samples"}) {
    EXPECT_FALSE(fresh.contains(sometimes)) << sometimes;
  }
}

TEST(RunSummary, ReadingIgnoresWhatIsAbsentOrOfAnotherTypeAndNeverThrows) {
  const nlohmann::json odd = {{"status", 3},
                              {"world_size", "two"},
                              {"test_accuracy", "high"},
                              {"peak_memory_bytes", {1, "x"}},
                              {"per_class_accuracy", {50.0, nullptr}},
                              {"epochs_detail", {{{"epoch", 1}, {"seconds", 2.0}}, 7}},
                              {"launcher", {{"anything", true}}}};
  RunSummary s;
  ASSERT_NO_THROW(s = RunSummaryFromJson(odd));
  EXPECT_EQ(s.status, "failed") << "a status that is not text is not ok";
  EXPECT_EQ(s.world_size, 1);
  EXPECT_FALSE(s.test_accuracy.has_value());
  EXPECT_TRUE(s.peak_memory_bytes.empty()) << "a list with one bad entry is left unset whole";
  ASSERT_EQ(s.per_class_accuracy.size(), 2u);
  EXPECT_TRUE(std::isnan(s.per_class_accuracy[1])) << "NaN is written as null";
  EXPECT_TRUE(s.epochs_detail.empty()) << "an epoch that is not an object";
  ASSERT_TRUE(s.launcher.has_value());
  EXPECT_NO_THROW(RunSummaryFromJson(nlohmann::json::array()));
  EXPECT_NO_THROW(RunSummaryFromJson(nullptr));
}

TEST(EpochRecord, AnEpochNumberAFileLacksIsNaNNotZero) {
  const auto epochs = EpochRecordsFromJson(nlohmann::json::array({{{"epoch", 2}, {"test_accuracy", 12.5}}}));
  ASSERT_TRUE(epochs.has_value());
  ASSERT_EQ(epochs->size(), 1u);
  EXPECT_EQ((*epochs)[0].epoch, 2);
  EXPECT_EQ((*epochs)[0].test_accuracy, 12.5);
  EXPECT_TRUE(std::isnan((*epochs)[0].images_per_second)) << "a report shows '-' for it, not 0";
  EXPECT_FALSE(EpochRecordsFromJson(nlohmann::json::object()).has_value());
  EXPECT_FALSE(EpochRecordsFromJson(nlohmann::json::array({1})).has_value());
}

}  // namespace
}  // namespace mgpu
