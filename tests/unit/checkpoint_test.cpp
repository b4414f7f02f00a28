// Checkpoints: the file framing catches damage, the state round-trips exactly, a mismatched run
// is refused naming the field, and writing leaves only whole files behind.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <tuple>

#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "amp/grad_scaler.h"
#include "common/files.h"
#include "common/status.h"
#include "models/model_factory.h"
#include "optim/fused_optimizer.h"
#include "optim/lr_scheduler.h"
#include "tests/support/test_support.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_file.h"
#include "worker/torch_archive.h"

namespace mgpu {
namespace {

using testing::BadInputMessage;
using testing::TempDir;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A checkpoint's state as the trainer writes it: tensors, dicts of them, lists with a gap.
c10::impl::GenericDict SomeState() {
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  c10::Dict<std::string, torch::Tensor> parameters;
  parameters.insert("fc.weight", torch::full({4, 4}, 7.0f));
  state.insert("parameters", parameters);
  c10::impl::GenericList optimizer(c10::AnyType::get());
  optimizer.push_back(torch::arange(3, torch::kDouble));
  optimizer.push_back(c10::IValue());
  state.insert("optimizer", optimizer);
  return state;
}

// A version-1 checkpoint (mgpu before format 2) of tests/fuzz's LeNet, as it was written.
std::string Version1Checkpoint() {
  return ReadFile(std::string(MGPU_SOURCE_DIR) + "/tests/fuzz/corpus/checkpoint/lenet-sgd.ckpt");
}

TEST(CheckpointFile, IsATorchSaveArchiveOfHeaderAndStateThatRoundTrips) {
  const std::string bytes = EncodeCheckpointFile("{\"a\": 1}", SomeState());
  EXPECT_EQ(bytes.rfind("PK\x03\x04", 0), 0u) << "a zip archive, as torch.save writes";
  const CheckpointFileContents back = DecodeCheckpointFile(bytes, "x.ckpt");
  EXPECT_EQ(back.header, "{\"a\": 1}");
  EXPECT_EQ(back.state.size(), 2u) << "the format's own keys are not part of the state";
  EXPECT_TRUE(torch::equal(back.state.at("parameters").toGenericDict().at("fc.weight").toTensor(),
                           torch::full({4, 4}, 7.0f)));
  EXPECT_TRUE(back.state.at("optimizer").toListRef()[1].isNone());
  EXPECT_EQ(CheckpointStateCrc32c(back.header, back.state), CheckpointStateCrc32c("{\"a\": 1}", SomeState()));
}

TEST(CheckpointFile, NamesThePathAndWhatIsWrong) {
  const std::string bytes = EncodeCheckpointFile("{}", SomeState());
  const auto decode = [](const std::string& b) { return BadInputMessage([&] { DecodeCheckpointFile(b, "run/c.ckpt"); }); };

  const std::string truncated = decode(bytes.substr(0, bytes.size() - 3));
  EXPECT_TRUE(Contains(truncated, "run/c.ckpt")) << truncated;
  EXPECT_TRUE(Contains(truncated, "truncated")) << truncated;
  EXPECT_TRUE(Contains(decode(bytes.substr(0, bytes.size() / 2)), "truncated"));
  EXPECT_TRUE(Contains(decode(bytes.substr(0, 2)), "truncated"));
  EXPECT_TRUE(Contains(decode(""), "truncated"));

  // A byte of the tensor 7.0f (0x40e00000) changed in place: the archive still reads.
  std::string flipped = bytes;
  const size_t tensor = flipped.find(std::string("\x00\x00\xe0\x40\x00\x00\xe0\x40", 8));
  ASSERT_NE(tensor, std::string::npos);
  flipped[tensor + 2] ^= 0x10;
  EXPECT_TRUE(Contains(decode(flipped), "CRC-32C")) << decode(flipped);

  EXPECT_TRUE(Contains(decode("GIF89a, not a checkpoint at all"), "not an mgpu checkpoint"));
  EXPECT_TRUE(Contains(decode(WriteTorchArchive(torch::ones({2}))), "not of a dict"));
  c10::impl::GenericDict foreign(c10::StringType::get(), c10::AnyType::get());
  foreign.insert("state_dict", torch::ones({2}));
  EXPECT_TRUE(Contains(decode(WriteTorchArchive(foreign)), "has no 'format'")) << decode(WriteTorchArchive(foreign));
  foreign.insert("format", std::string("mgpu-checkpoint"));
  foreign.insert("format_version", int64_t{9});
  EXPECT_TRUE(Contains(decode(WriteTorchArchive(foreign)), "format version 9")) << decode(WriteTorchArchive(foreign));
}

TEST(CheckpointFile, Version1FilesAreStillRead) {
  const CheckpointFileContents contents = DecodeCheckpointFile(Version1Checkpoint(), "old.ckpt");
  EXPECT_EQ(nlohmann::json::parse(contents.header)["format"], "mgpu-checkpoint");
  EXPECT_TRUE(contents.state.contains("parameters"));
  EXPECT_TRUE(contents.state.contains("optimizer"));
}

// The corpus' checkpoints, of both formats, resume tests/fuzz's run (a LeNet on 1x16x16 images of
// two classes, SGD): format 1 files written before format 2 still continue their runs.
TEST(CheckpointFile, BothFormatsRestoreTheRunTheyWereWrittenBy) {
  for (const std::string name : {"lenet-sgd.ckpt", "lenet-sgd-v2.ckpt"}) {
    SCOPED_TRACE(name);
    auto model = MakeModel("lenet", ModelShape{1, 2, 16, 16});
    OptimizerOptions sgd;
    sgd.kind = "sgd";
    FusedOptimizer optimizer(model->parameters(), sgd);
    GradScaler scaler(ParseLossScaling("dynamic"), torch::kCPU);
    LrScheduler scheduler(SchedulerOptions{});
    TrainConfig config;
    config.model = "lenet";
    config.optimizer = "sgd";
    TrainingParts parts{*model, optimizer, scaler, scheduler, torch::kCPU};
    const std::string path = std::string(MGPU_SOURCE_DIR) + "/tests/fuzz/corpus/checkpoint/" + name;
    const TrainingPosition position = RestoreCheckpoint(path, CheckpointIdentity::Of(config, 1, *model), parts);
    EXPECT_GE(position.step, 0);
  }
}

TEST(CheckpointFile, Version1DamageIsNamed) {
  const std::string bytes = Version1Checkpoint();
  const auto decode = [](const std::string& b) { return BadInputMessage([&] { DecodeCheckpointFile(b, "run/c.ckpt"); }); };
  EXPECT_TRUE(Contains(decode(bytes.substr(0, bytes.size() - 3)), "truncated"));
  EXPECT_TRUE(Contains(decode(bytes.substr(0, 20)), "truncated"));
  std::string flipped = bytes;
  flipped[flipped.size() - 2] ^= 0x10;
  EXPECT_TRUE(Contains(decode(flipped), "CRC-32C")) << decode(flipped);
  EXPECT_TRUE(Contains(decode(bytes + "x"), "after the announced end"));
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
  EpochRecord first_epoch;
  first_epoch.train_loss = 2.5;
  first_epoch.phase_seconds = {{"forward", 0.125}};
  position.epochs_detail = {first_epoch};
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
  EXPECT_EQ(EpochRecordsToJson(back.epochs_detail).dump(), EpochRecordsToJson(position.epochs_detail).dump())
      << "compared as text: an unset epoch number is NaN, written null";

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

// A checkpoint of TrainedLeNet at a mid-epoch position, rewritten as a forger would: `edit`
// changes its header or tensors, then the CRC-32C is recomputed so that the framing holds.
class ForgedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    original_.Steps(3);
    Write();
  }
  // (Re)writes the checkpoint as the run wrote it.
  void Write() {
    TrainingPosition position;
    position.epoch = 1;
    position.step = 23;
    position.epoch_steps = 3;
    position.micro_batches = 3;
    position.images_seen = 12;
    position.loss_sum = torch::tensor(6.0, torch::kDouble);
    position.loss_images = torch::tensor(12.0, torch::kDouble);
    auto parts = original_.Parts();
    WriteFileAtomically(path(), SerializeCheckpoint(original_.Identity(), parts, position));
  }
  std::string path() const { return dir_ / "c.ckpt"; }

  void Forge(const std::function<void(nlohmann::json& header, c10::impl::GenericDict& payload)>& edit) {
    CheckpointFileContents contents = DecodeCheckpointFile(ReadFile(path()), path());
    nlohmann::json header = nlohmann::json::parse(contents.header);
    edit(header, contents.state);
    WriteFileAtomically(path(), EncodeCheckpointFile(header.dump(), contents.state));
  }
  void ForgeParameter(const std::string& name, const torch::Tensor& value) {
    Forge([&](nlohmann::json&, c10::impl::GenericDict& payload) {
      payload.at("parameters").toGenericDict().insert_or_assign(name, value);
    });
  }
  torch::Tensor StoredParameter(const std::string& name) {
    const CheckpointFileContents contents = DecodeCheckpointFile(ReadFile(path()), path());
    return contents.state.at("parameters").toGenericDict().at(name).toTensor();
  }

  // Restores into a fresh LeNet; expects BadInputError naming the file, and that nothing of the
  // checkpoint was loaded. Returns the message.
  std::string Refusal() {
    TrainedLeNet resumed(2);
    const std::vector<torch::Tensor> before = resumed.model->parameters();
    std::vector<torch::Tensor> copies;
    for (const auto& p : before) copies.push_back(p.detach().clone());
    auto parts = resumed.Parts();
    const std::string message = BadInputMessage([&] { RestoreCheckpoint(path(), resumed.Identity(), parts); });
    EXPECT_TRUE(Contains(message, path())) << message;
    ExpectSameTensors(resumed.model->parameters(), copies);
    return message;
  }

  TempDir dir_;
  TrainedLeNet original_{1};
};

TEST_F(ForgedCheckpoint, AMissingStateEntryIsRefusedNamingIt) {
  Forge([](nlohmann::json&, c10::impl::GenericDict& payload) { ASSERT_EQ(payload.erase("rng_cpu"), 1u); });
  const std::string message = Refusal();
  EXPECT_TRUE(Contains(message, "it has no 'rng_cpu'")) << message;
}

TEST_F(ForgedCheckpoint, ANegativeEpochIsRefusedNamingTheFieldAndTheRange) {
  Forge([](nlohmann::json& header, c10::impl::GenericDict&) { header["position"]["epoch"] = -123456788; });
  const std::string message = Refusal();
  EXPECT_TRUE(Contains(message, "position field 'epoch' is -123456788")) << message;
  EXPECT_TRUE(Contains(message, "integers >= 0")) << message;
  EXPECT_TRUE(Contains(message, "earlier step-N.ckpt")) << message;
}

TEST_F(ForgedCheckpoint, EveryPositionAndScheduleFieldIsCheckedForItsRange) {
  const std::vector<std::tuple<std::string, std::string, nlohmann::json, std::string>> forgeries = {
      {"position", "step", -1, "'step' is -1"},
      {"position", "epoch_steps", 24, "'epoch_steps' is 24, outside the allowed integers 0..23"},
      {"position", "micro_batches", 2, "'micro_batches' is 2, outside the allowed integers >= 3"},
      {"position", "images_seen", -12, "'images_seen' is -12"},
      {"position", "epoch", 1.5, "'epoch' is 1.5"},
      {"position", "step", 18446744073709551615ull, "'step' is 18446744073709551615"},
      {"position", "micro_batches", "3", "'micro_batches' is \"3\""},
      {"scheduler", "steps", -5, "scheduler field 'steps' is -5"},
      {"scheduler", "bad_epochs", -1, "scheduler field 'bad_epochs' is -1"},
      {"scheduler", "lr", -0.01, "lr -0.01"},
  };
  for (const auto& [section, field, value, expected] : forgeries) {
    Write();
    Forge([&](nlohmann::json& header, c10::impl::GenericDict&) { header[section][field] = value; });
    const std::string message = Refusal();
    EXPECT_TRUE(Contains(message, expected)) << section << "." << field << ": " << message;
  }
}

TEST_F(ForgedCheckpoint, ANonFiniteWeightIsRefusedNamingTheTensor) {
  const std::string name = original_.model->named_parameters().begin()->key();
  torch::Tensor weight = StoredParameter(name).clone();
  // One float's bits rewritten to infinity's (all exponent bits set, no mantissa).
  reinterpret_cast<uint32_t*>(weight.data_ptr<float>())[0] = 0x7f800000u;
  ASSERT_TRUE(std::isinf(weight.flatten()[0].item<float>()));
  ForgeParameter(name, weight);
  const std::string message = Refusal();
  EXPECT_TRUE(Contains(message, "parameter '" + name + "' has non-finite values")) << message;
}

TEST_F(ForgedCheckpoint, AWeightOfAnotherShapeIsRefusedNamingTheTensorAndBothShapes) {
  const std::string name = original_.model->named_parameters().begin()->key();
  const torch::Tensor weight = StoredParameter(name);
  ForgeParameter(name, weight.flatten());
  const std::string message = Refusal();
  EXPECT_TRUE(Contains(message, "parameter '" + name + "'")) << message;
  EXPECT_TRUE(Contains(message, fmt::format("shape [{}]", weight.numel()))) << message;
  EXPECT_TRUE(Contains(message, fmt::format("shape [{}]", fmt::join(weight.sizes(), "x")))) << message;
}

TEST_F(ForgedCheckpoint, AWeightOfAnotherDtypeIsRefusedNamingTheTensorAndBothDtypes) {
  const std::string name = original_.model->named_parameters().begin()->key();
  ForgeParameter(name, StoredParameter(name).to(torch::kDouble));
  const std::string message = Refusal();
  EXPECT_TRUE(Contains(message, "parameter '" + name + "' is Double")) << message;
  EXPECT_TRUE(Contains(message, "this run's is Float")) << message;
}

TEST_F(ForgedCheckpoint, AnExtraOrMissingTensorIsRefusedAsLoadStateDictStrictWould) {
  ForgeParameter("extra.weight", torch::zeros({2}));
  EXPECT_TRUE(Contains(Refusal(), "a parameter 'extra.weight' that this model does not have")) << Refusal();

  Write();
  Forge([](nlohmann::json&, c10::impl::GenericDict& payload) {
    c10::impl::GenericDict parameters = payload.at("parameters").toGenericDict();
    const c10::IValue first = parameters.begin()->key();
    ASSERT_EQ(parameters.erase(first), 1u);
  });
  EXPECT_TRUE(Contains(Refusal(), "has no parameter")) << Refusal();
}

TEST_F(ForgedCheckpoint, OptimizerAndScalerStateAreCheckedLikeTheWeights) {
  Forge([](nlohmann::json&, c10::impl::GenericDict& payload) {
    c10::impl::GenericList state = payload.at("optimizer").toList();
    state.set(1, state.get(1).toTensor().flatten());  // parameter 0's first moment
  });
  std::string message = Refusal();
  EXPECT_TRUE(Contains(message, "the optimizer's first moment of parameter 0")) << message;

  Write();
  Forge([](nlohmann::json&, c10::impl::GenericDict& payload) {
    c10::impl::GenericList state = payload.at("optimizer").toList();
    state.set(0, torch::full({}, -5.0f));  // parameter 0's step count
  });
  message = Refusal();
  EXPECT_TRUE(Contains(message, "the optimizer's step count of parameter 0 is -5")) << message;

  Write();
  Forge([](nlohmann::json&, c10::impl::GenericDict& payload) {
    c10::impl::GenericList state = payload.at("scaler").toList();
    state.set(0, torch::full({}, std::nanf(""), torch::kFloat));
  });
  message = Refusal();
  EXPECT_TRUE(Contains(message, "loss scale has non-finite values")) << message;
}

TEST(CheckpointPosition, MustFitAnEpochOfTheRun) {
  TrainingPosition position;
  position.epoch = 1;
  position.step = 23;
  position.epoch_steps = 3;
  position.micro_batches = 3;
  position.images_seen = 96;
  const EpochShape epoch{640, 20, 20};
  CheckPositionFits(position, epoch, "c.ckpt");

  TrainingPosition past = position;
  past.micro_batches = 21;
  EXPECT_TRUE(Contains(BadInputMessage([&] { CheckPositionFits(past, epoch, "c.ckpt"); }),
                       "'micro_batches' is 21, above this run's 20"));
  past = position;
  past.images_seen = 641;
  EXPECT_TRUE(Contains(BadInputMessage([&] { CheckPositionFits(past, epoch, "c.ckpt"); }), "'images_seen' is 641"));
  past = position;
  past.step = 24;
  EXPECT_TRUE(Contains(BadInputMessage([&] { CheckPositionFits(past, epoch, "c.ckpt"); }), "'step' is 24"));
  past = position;
  past.epoch_steps = 21;
  past.micro_batches = 21;
  EXPECT_TRUE(Contains(BadInputMessage([&] { CheckPositionFits(past, epoch, "c.ckpt"); }), "'epoch_steps' is 21"));
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

namespace mgpu {
namespace {

// The payload part of a fuzz corpus input (tests/fuzz/fuzz_checkpoint.cpp: header, NUL, payload).
std::string FuzzCorpusPayload(const std::string& name) {
  const std::string input = ReadFile(std::string(MGPU_SOURCE_DIR) + "/tests/fuzz/corpus/checkpoint/" + name);
  return input.substr(input.find('\0') + 1);
}

TEST(TorchArchive, ARecordReachingPastTheArchiveIsRefusedNotReadOutOfBounds) {
  const std::string message =
      testing::BadInputMessage([] { ReadTorchArchive(FuzzCorpusPayload("libtorch-zip-overread"), "x.ckpt"); });
  EXPECT_NE(message.find("checkpoint x.ckpt:"), std::string::npos) << message;
}

TEST(TorchArchive, APickleStringDeclaringMoreThanThePickleIsRefusedBeforeAnyAllocation) {
  const std::string message =
      testing::BadInputMessage([] { ReadTorchArchive(FuzzCorpusPayload("libtorch-unpickler-reserve"), "x.ckpt"); });
  EXPECT_NE(message.find("declares"), std::string::npos) << message;
}

TEST(TorchArchive, WhatTorchPickleSaveWroteLoadsBack) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("weights", torch::arange(6, torch::kFloat32).reshape({2, 3}));
  dict.insert("steps", int64_t{1} << 40);
  dict.insert("name", std::string(300, 'n'));
  const std::vector<char> saved = torch::pickle_save(c10::IValue(dict));
  const c10::IValue loaded = ReadTorchArchive(std::string(saved.begin(), saved.end()), "x.ckpt");
  const c10::impl::GenericDict back = loaded.toGenericDict();
  EXPECT_TRUE(torch::equal(back.at("weights").toTensor(), torch::arange(6, torch::kFloat32).reshape({2, 3})));
  EXPECT_EQ(back.at("steps").toInt(), int64_t{1} << 40);
  EXPECT_EQ(back.at("name").toStringRef(), std::string(300, 'n'));
}

TEST(TorchArchive, ATensorReachingPastItsStorageIsRefusedBeforeAnythingReadsIt) {
  // Found by fuzz_checkpoint: a shape whose last element lies past the storage record.
  const std::string message =
      testing::BadInputMessage([] { ReadTorchArchive(FuzzCorpusPayload("tensor-past-its-storage"), "x.ckpt"); });
  EXPECT_NE(message.find("declares a storage of 40320 bytes in a record of 480"), std::string::npos) << message;
}

TEST(TorchArchive, AStorageLargerThanItsRecordIsRefusedBeforeItIsWrittenAgain) {
  // Found by fuzz_checkpoint: a storage sized by the pickle's element count past its record's
  // bytes, which the archive writer then copied from (a heap overread) when the state was saved.
  const std::string message = testing::BadInputMessage(
      [] { ReadTorchArchive(FuzzCorpusPayload("storage-larger-than-its-record"), "x.ckpt"); });
  EXPECT_NE(message.find("declares a storage of"), std::string::npos) << message;
}

TEST(TorchArchive, AGarbledTypeTagIsBadInputNotAnEscapingException) {
  // Found by fuzz_checkpoint: the unpickler's type-tag parser throws its own std::runtime_error.
  const std::string message =
      testing::BadInputMessage([] { ReadTorchArchive(FuzzCorpusPayload("garbled-type-tag"), "x.ckpt"); });
  EXPECT_NE(message.find("checkpoint x.ckpt:"), std::string::npos) << message;
}

TEST(TorchArchive, AQuantizedTensorIsRefusedBeforeAnythingTouchesIt) {
  // Found by fuzz_checkpoint: a quantized tensor whose quantizer LibTorch does not know, which
  // failed an internal assertion (an abort) when the state was written again.
  const std::string message = testing::BadInputMessage(
      [] { ReadTorchArchive(FuzzCorpusPayload("quantized-unknown-quantizer"), "x.ckpt"); });
  EXPECT_NE(message.find("holds a quantized tensor"), std::string::npos) << message;
  // A well-formed one too: no mgpu checkpoint holds one.
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("weights", torch::quantize_per_tensor(torch::ones({4}), 0.5, 0, torch::kQInt8));
  const std::string archive = WriteTorchArchive(dict);
  const std::string quantized = testing::BadInputMessage([&] { ReadTorchArchive(archive, "y.ckpt"); });
  EXPECT_NE(quantized.find("checkpoint y.ckpt: its tensor archive holds a quantized tensor of type QInt8"),
            std::string::npos) << quantized;
}

TEST(TorchArchive, WhatItWritesHasNoTypeTagAndLoadsBack) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("weights", torch::arange(6, torch::kFloat32).reshape({2, 3}));
  dict.insert("format_version", int64_t{2});
  const std::string archive = WriteTorchArchive(dict);
  EXPECT_EQ(archive.find("restore_type_tag"), std::string::npos) << "torch.load(weights_only=True) refuses the tag";
  const c10::impl::GenericDict back = ReadTorchArchive(archive, "x.ckpt").toGenericDict();
  EXPECT_TRUE(torch::equal(back.at("weights").toTensor(), torch::arange(6, torch::kFloat32).reshape({2, 3})));
  EXPECT_EQ(back.at("format_version").toInt(), 2);
}

}  // namespace
}  // namespace mgpu
