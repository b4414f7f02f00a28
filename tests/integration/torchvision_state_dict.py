"""Loads an mgpu run's model_state_dict.pt into torchvision's architecture and evaluates it.

    torchvision_state_dict.py MODEL STATE_DICT TEST_SET CHANNELS CLASSES SIDE

MODEL is resnet18|resnet34|resnet50|vgg11|vgg13|vgg16|vgg19|alexnet; TEST_SET a torch.save dict
{"images": (N, C, H, W) float32, "labels": (N,) int64} of the inputs mgpu evaluated. Prints
{"correct": K, "total": N} as JSON.

The test venv has torch but not torchvision, so the architectures are torchvision's own
(torchvision/models/resnet.py, vgg.py, alexnet.py of torchvision 0.26), written out with the same
module names; load_state_dict(strict=True) then checks that every parameter and buffer name and
shape of mgpu's export is torchvision's. Where mgpu adapts an architecture to small images, the
script makes the same change a user would make to the torchvision model before loading
(docs/GUIDE.md, "Using the trained model in Python"): the CIFAR stem of a ResNet, VGG's one-Linear
head, and a first convolution for CHANNELS input channels.
"""
import json
import sys

import torch
from torch import nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


VGG_CONFIGS = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512,
              "M"],
}


class VGG(nn.Module):  # torchvision's vgg*_bn: make_layers(cfg, batch_norm=True)
    def __init__(self, config, num_classes):
        super().__init__()
        layers, in_channels = [], 3
        for v in config:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(in_channels, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                in_channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class AlexNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
                                        nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
                                        nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def build(name, channels, classes, side):
    """torchvision's model, adapted as docs/GUIDE.md says for mgpu's small-image variants."""
    if name.startswith("resnet"):
        block, layers = {"resnet18": (BasicBlock, [2, 2, 2, 2]), "resnet34": (BasicBlock, [3, 4, 6, 3]),
                         "resnet50": (Bottleneck, [3, 4, 6, 3])}[name]
        model = ResNet(block, layers, classes)
        if side <= 64:  # mgpu's CIFAR stem (models/resnet.h)
            model.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
            model.maxpool = nn.Identity()
        elif channels != 3:
            model.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
        return model
    if name.startswith("vgg"):
        model = VGG(VGG_CONFIGS[name], classes)
        model.features[0] = nn.Conv2d(channels, 64, 3, padding=1)
        model.avgpool = nn.AdaptiveAvgPool2d(1)  # mgpu's CIFAR head (models/vgg.h)
        model.classifier = nn.Linear(512, classes)
        return model
    model = AlexNet(classes)
    model.features[0] = nn.Conv2d(channels, 64, 11, 4, 2)
    return model


def main():
    name, state_path, test_path = sys.argv[1:4]
    channels, classes, side = (int(v) for v in sys.argv[4:7])
    state = torch.load(state_path, weights_only=True)
    model = build(name, channels, classes, side)
    model.load_state_dict(state, strict=True)
    model.eval()
    test = torch.load(test_path, weights_only=True)
    with torch.no_grad():
        correct = int((model(test["images"]).argmax(1) == test["labels"]).sum())
    print(json.dumps({"correct": correct, "total": int(test["labels"].numel()), "keys": list(state.keys())}))


if __name__ == "__main__":
    main()
