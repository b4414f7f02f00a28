// configs/: one comparison file per seed experiment, each a valid plan that names its data.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/files.h"
#include "launcher/compare/compare_plan.h"

namespace mgpu {
namespace {

const std::string kConfigs = std::string(MGPU_SOURCE_DIR) + "/configs/";

std::string Option(const PlannedRun& run, const std::string& key) {
  for (const auto& [name, value] : run.options) {
    if (name == key) return value;
  }
  return "";
}

ComparePlan Load(const std::string& file, bool quick = false) {
  return ParseComparePlan(ReadFile(kConfigs + file), file, quick);
}

TEST(SeedExperimentConfigs, EachParsesWithAndWithoutQuickAndNamesItsData) {
  const std::map<std::string, size_t> runs = {{"demo.yaml", 4},
                                              {"mnist-methods.yaml", 9},
                                              {"vgg19-cifar10-precision.yaml", 4},
                                              {"alexnet-cifar10-amp.yaml", 3},
                                              {"resnet18-imagefolder-amp.yaml", 2},
                                              {"resnet50-imagenet-batch.yaml", 9}};
  for (const auto& [file, count] : runs) {
    for (const bool quick : {false, true}) {
      const ComparePlan plan = Load(file, quick);
      ASSERT_EQ(plan.runs.size(), count) << file;
      for (const PlannedRun& run : plan.runs) {
        const std::string dataset = Option(run, "dataset");
        EXPECT_TRUE(dataset == "fashion-mnist" || !Option(run, "data-dir").empty())
            << file << ": run " << run.name << " must say where its data is";
        if (quick) {
          EXPECT_FALSE(Option(run, "max-steps").empty()) << file << ": --quick must bound " << run.name;
        }
      }
    }
  }
}

TEST(SeedExperimentConfigs, TheMnistExperimentComparesItsThreeMethodsAtEachWorkerCount) {
  std::map<std::string, int> modes;
  for (const PlannedRun& run : Load("mnist-methods.yaml").runs) ++modes[Option(run, "mode") + "/" + Option(run, "num-workers")];
  for (const char* mode : {"single", "dp", "ddp"}) {
    for (const char* workers : {"0", "2", "4"}) EXPECT_EQ((modes[std::string(mode) + "/" + workers]), 1) << mode << " " << workers;
  }
}

TEST(SeedExperimentConfigs, TheResNet50ExperimentScalesTheLearningRateWithTheBatch) {
  for (const PlannedRun& run : Load("resnet50-imagenet-batch.yaml").runs) {
    EXPECT_EQ(Option(run, "lr-scale-rule"), "linear") << run.name;
    EXPECT_EQ(Option(run, "mode"), "ddp") << run.name;
  }
  EXPECT_EQ(Option(Load("resnet50-imagenet-batch.yaml").runs.back(), "batch-size"), "4096");
}

}  // namespace
}  // namespace mgpu
