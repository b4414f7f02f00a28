// Checkpoints: the file framing catches damage, the state round-trips exactly, a mismatched run
// is refused naming the field, and writing leaves only whole files behind.
#include <gtest/gtest.h>

#include "amp/grad_scaler.h"
#include "common/files.h"
#include "common/status.h"
#include "models/model_factory.h"
#include "optim/fused_optimizer.h"
#include "optim/lr_scheduler.h"
#include "tests/support/test_support.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_file.h"

namespace mgpu {
namespace {

using testing::BadInputMessage;
using testing::TempDir;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CheckpointFile, RoundTripsHeaderAndPayload) {
  const std::string bytes = EncodeCheckpointFile({"{\"a\": 1}", std::string("\0\1\2payload", 10)});
  EXPECT_EQ(bytes.rfind("MGPUCKPT", 0), 0u);
  const CheckpointFileContents back = DecodeCheckpointFile(bytes, "x.ckpt");
  EXPECT_EQ(back.header, "{\"a\": 1}");
  EXPECT_EQ(back.payload, std::string("\0\1\2payload", 10));
}

TEST(CheckpointFile, NamesThePathAndWhatIsWrong) {
  const std::string bytes = EncodeCheckpointFile({"{}", "some tensors"});
  const auto decode = [](const std::string& b) { return BadInputMessage([&] { DecodeCheckpointFile(b, "run/c.ckpt"); }); };

  const std::string truncated = decode(bytes.substr(0, bytes.size() - 3));
  EXPECT_TRUE(Contains(truncated, "run/c.ckpt")) << truncated;
  EXPECT_TRUE(Contains(truncated, "truncated")) << truncated;
  EXPECT_TRUE(Contains(decode(bytes.substr(0, 20)), "truncated"));
  EXPECT_TRUE(Contains(decode(""), "truncated"));

  std::string flipped = bytes;
  flipped[flipped.size() - 2] ^= 0x10;
  EXPECT_TRUE(Contains(decode(flipped), "CRC-32C")) << decode(flipped);

  EXPECT_TRUE(Contains(decode(bytes + "x"), "after the announced end"));
  EXPECT_TRUE(Contains(decode("PK\3\4 a zip file, not a checkpoint at all"), "not an mgpu checkpoint"));
  std::string future = bytes;
  future[8] = 9;
  EXPECT_TRUE(Contains(decode(future), "format version 9")) << decode(future);
}

// A LeNet with Adam, a dynamic loss scaler and a plateau schedule, after a few steps.
struct TrainedLeNet {
  explicit TrainedLeNet(uint64_t seed) {
    torch::manual_seed(seed);
    model = MakeModel("lenet", ModelShape{1, 10, 28, 28});
    OptimizerOptions options;
    options.kind = "adam";
    optimizer = std::make_unique<FusedOptimizer>(model->parameters(), options);
    scaler = std::make_unique<GradScaler>(ParseLossScaling("dynamic"), torch::kCPU);
    SchedulerOptions schedule;
    schedule.kind = "plateau";
    schedule.base_lr = 0.01;
    schedule.plateau_patience = 0;
    schedule.plateau_factor = 0.5;
    scheduler = std::make_unique<LrScheduler>(schedule);
  }
  void Steps(int n) {
    for (int i = 0; i < n; ++i) {
      optimizer->ZeroGrad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(torch::randn({4, 1, 28, 28})),
                                                       torch::randint(10, {4}));
      scaler->Scale(loss).backward();
      scaler->Step(*optimizer);
      scaler->Update();
      scheduler->OnStep();
    }
    scheduler->OnEpochEnd(1.0);
    scheduler->OnEpochEnd(2.0);  // a bad epoch: the lr halves
    optimizer->set_lr(scheduler->lr());
  }
  TrainingParts Parts() { return TrainingParts{*model, *optimizer, *scaler, *scheduler, torch::kCPU}; }
  CheckpointIdentity Identity(const std::string& model_name = "lenet") {
    TrainConfig config;
    config.model = model_name;
    return CheckpointIdentity::Of(config, 1, *model);
  }

  std::shared_ptr<Classifier> model;
  std::unique_ptr<FusedOptimizer> optimizer;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<LrScheduler> scheduler;
};

void ExpectSameTensors(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << i;
    if (a[i].defined()) {
      EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
    }
  }
}

TEST(Checkpoint, RestoresEveryPartExactly) {
  TempDir dir;
  TrainedLeNet original(1);
  original.Steps(3);
  TrainingPosition position;
  position.epoch = 1;
  position.step = 3;
  position.epoch_steps = 2;
  position.micro_batches = 2;
  position.images_seen = 8;
  position.loss_sum = torch::tensor(12.25, torch::kDouble);
  position.loss_images = torch::tensor(8.0, torch::kDouble);
  position.epochs_detail = nlohmann::json::array({{{"epoch", 0}, {"train_loss", 2.5}}});
  auto parts = original.Parts();
  WriteFileAtomically(dir / "c.ckpt", SerializeCheckpoint(original.Identity(), parts, position));
  const torch::Tensor next_draw = torch::rand({5});  // what the generator gives after the save

  TrainedLeNet resumed(2);  // other initial weights, fresh optimizer, scaler and schedule
  auto resumed_parts = resumed.Parts();
  const TrainingPosition back = RestoreCheckpoint(dir / "c.ckpt", resumed.Identity(), resumed_parts);

  ExpectSameTensors(resumed.model->parameters(), original.model->parameters());
  ExpectSameTensors(resumed.model->buffers(), original.model->buffers());
  ExpectSameTensors(resumed.optimizer->StateTensors(), original.optimizer->StateTensors());
  ExpectSameTensors(resumed.scaler->StateTensors(), original.scaler->StateTensors());
  EXPECT_EQ(resumed.scheduler->lr(), 0.005);
  EXPECT_EQ(resumed.optimizer->lr(), 0.005) << "the optimizer steps with the restored lr";
  EXPECT_EQ(resumed.scheduler->state().steps, 3);
  EXPECT_EQ(resumed.scheduler->state().best, 1.0);
  EXPECT_EQ(resumed.scheduler->state().bad_epochs, 0);
  EXPECT_TRUE(torch::equal(torch::rand({5}), next_draw)) << "the CPU generator continues where it was";
  EXPECT_EQ(back.epoch, 1);
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.epoch_steps, 2);
  EXPECT_EQ(back.micro_batches, 2);
  EXPECT_EQ(back.images_seen, 8);
  EXPECT_EQ(back.loss_sum.item<double>(), 12.25);
  EXPECT_EQ(back.loss_images.item<double>(), 8.0);
  EXPECT_EQ(back.epochs_detail, position.epochs_detail);

  // Both continue identically.
  torch::manual_seed(7);
  original.Steps(2);
  torch::manual_seed(7);
  resumed.Steps(2);
  ExpectSameTensors(resumed.model->parameters(), original.model->parameters());
}

TEST(Checkpoint, AnUnsteppedPlateauScheduleRoundTripsItsInfiniteBest) {
  TempDir dir;
  TrainedLeNet original(1);
  TrainingPosition position;
  position.loss_sum = torch::zeros({}, torch::kDouble);
  position.loss_images = torch::zeros({}, torch::kDouble);
  auto parts = original.Parts();
  WriteFileAtomically(dir / "c.ckpt", SerializeCheckpoint(original.Identity(), parts, position));
  TrainedLeNet resumed(2);
  auto resumed_parts = resumed.Parts();
  RestoreCheckpoint(dir / "c.ckpt", resumed.Identity(), resumed_parts);
  EXPECT_TRUE(std::isinf(resumed.scheduler->state().best));
  ExpectSameTensors(resumed.optimizer->StateTensors(), original.optimizer->StateTensors());
}

TEST(Checkpoint, ARunOfAnotherModelIsRefusedNamingTheField) {
  TempDir dir;
  TrainedLeNet original(1);
  TrainingPosition position;
  position.loss_sum = torch::zeros({}, torch::kDouble);
  position.loss_images = torch::zeros({}, torch::kDouble);
  auto parts = original.Parts();
  WriteFileAtomically(dir / "c.ckpt", SerializeCheckpoint(original.Identity(), parts, position));
  TrainedLeNet other(2);
  auto other_parts = other.Parts();
  const std::string message =
      BadInputMessage([&] { RestoreCheckpoint(dir / "c.ckpt", other.Identity("resnet18"), other_parts); });
  EXPECT_TRUE(Contains(message, "--model \"lenet\"")) << message;
  EXPECT_TRUE(Contains(message, "--model \"resnet18\"")) << message;
  EXPECT_TRUE(Contains(message, dir / "c.ckpt")) << message;
}

TEST(CheckpointWriter, LeavesStepFilesAndLatestOnlyWithLatestTheNewest) {
  TempDir dir;
  CheckpointWriter writer(dir / "checkpoints", 3, /*writes=*/true);
  EXPECT_FALSE(writer.DueAfterStep(2));
  EXPECT_TRUE(writer.DueAfterStep(6));
  EXPECT_EQ(writer.Write(3, [] { return std::string("three"); }), dir / "checkpoints/step-3.ckpt");
  writer.Write(6, [] { return std::string("six"); });
  EXPECT_EQ(ListDirectory(dir / "checkpoints"), (std::vector<std::string>{"latest.ckpt", "step-3.ckpt", "step-6.ckpt"}))
      << "no temporary file is left behind";
  EXPECT_EQ(ReadFile(dir / "checkpoints/latest.ckpt"), "six");
  EXPECT_EQ(ReadFile(dir / "checkpoints/step-3.ckpt"), "three");
}

TEST(CheckpointWriter, OtherRanksWriteNothing) {
  TempDir dir;
  CheckpointWriter writer(dir / "checkpoints", 1, /*writes=*/false);
  EXPECT_EQ(writer.Write(1, [] {
    ADD_FAILURE() << "only the writing rank serializes";
    return std::string();
  }),
            "");
  EXPECT_FALSE(PathExists(dir / "checkpoints"));
}

TEST(ResumePath, AFolderMeansItsLatestCheckpoint) {
  TempDir dir;
  MakeDirectories(dir / "run/checkpoints");
  const std::string no_latest = BadInputMessage([&] { ResolveResumePath(dir / "run"); });
  EXPECT_TRUE(Contains(no_latest, "checkpoints/latest.ckpt")) << no_latest;
  EXPECT_TRUE(Contains(no_latest, "--checkpoint-every")) << no_latest;
  WriteFileAtomically(dir / "run/checkpoints/latest.ckpt", "x");
  EXPECT_EQ(ResolveResumePath(dir / "run"), dir / "run/checkpoints/latest.ckpt");
  EXPECT_EQ(ResolveResumePath(dir / "run/checkpoints/latest.ckpt"), dir / "run/checkpoints/latest.ckpt");
  const std::string missing = BadInputMessage([&] { ResolveResumePath(dir / "nowhere.ckpt"); });
  EXPECT_TRUE(Contains(missing, "no such checkpoint file or run folder")) << missing;
}

}  // namespace
}  // namespace mgpu
