"""What gpubench's two PyTorch scripts share: the models (torchvision's ResNet
layout and gpubench's tinycnn, with gpubench's parameter names), the process
settings gpubench applies, and small helpers.

pytorch_bench.py (training, `run --impl pytorch`) and pytorch_serve.py
(serving, `infer --impl pytorch`) import it; gpubench writes all three into
one temporary directory. It runs on torch 1.12 (Python 3.8) to 2.11.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


def conv3x3(c_in, c_out, stride=1):
    return nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(c_in, c_out, stride=1):
    return nn.Conv2d(c_in, c_out, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, c_in, width, stride, inplace):
        super().__init__()
        c_out = width * self.expansion
        self.inplace = inplace
        self.conv1 = conv3x3(c_in, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=inplace)
        self.conv2 = conv3x3(width, c_out)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(conv1x1(c_in, c_out, stride), nn.BatchNorm2d(c_out))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y = y.add_(shortcut) if self.inplace else y + shortcut
        return self.relu(y)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in, width, stride, inplace):
        super().__init__()
        c_out = width * self.expansion
        self.inplace = inplace
        self.conv1 = conv1x1(c_in, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, c_out)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=inplace)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(conv1x1(c_in, c_out, stride), nn.BatchNorm2d(c_out))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        y = y.add_(shortcut) if self.inplace else y + shortcut
        return self.relu(y)


class ResNet(nn.Module):
    def __init__(self, block, counts, num_classes, inplace):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=inplace)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        c_in = 64
        stages = []
        for i, (width, n) in enumerate(zip((64, 128, 256, 512), counts)):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(c_in, width, stride, inplace))
                c_in = width * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        # --checkpoint: the stem and each stage under torch.utils.checkpoint while training.
        self.checkpoint_stages = False
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        # torchvision's initialisation (used only without --init).
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def stem(self, x):
        return self.maxpool(self.relu(self.bn1(self.conv1(x))))

    def forward(self, x):
        if self.checkpoint_stages and self.training:
            x = torch.utils.checkpoint.checkpoint(self.stem, x, use_reentrant=False)
        else:
            x = self.stem(x)
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            if self.checkpoint_stages and self.training:
                x = torch.utils.checkpoint.checkpoint(stage, x, use_reentrant=False)
            else:
                x = stage(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


class TinyCNN(nn.Module):
    """gpubench's BatchNorm-free test model (src/model.rs)."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, stride=2, padding=1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


RESNETS = {
    "resnet18": (BasicBlock, (2, 2, 2, 2)),
    "resnet34": (BasicBlock, (3, 4, 6, 3)),
    "resnet50": (Bottleneck, (3, 4, 6, 3)),
    "resnet101": (Bottleneck, (3, 4, 23, 3)),
    "resnet152": (Bottleneck, (3, 8, 36, 3)),
}
MODELS = sorted(RESNETS) + ["tinycnn"]


def build_model(name, num_classes, inplace=True):
    """torchvision's ResNet uses in-place ReLU and residual add; tch's
    (gpubench's) uses out-of-place ones. Same values; inplace=False mirrors
    tch, to tell a difference in speed due to that from one due to the
    framework."""
    if name == "tinycnn":
        return TinyCNN(num_classes)
    block, counts = RESNETS[name]
    return ResNet(block, counts, num_classes, inplace)


def is_oom(msg):
    m = msg.lower()
    return "out of memory" in m or "can't allocate memory" in m or "cannot allocate memory" in m


def one_line(e):
    s = str(e).strip().splitlines()
    return s[0].strip() if s else type(e).__name__


def make_sync(device):
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.machine()


AMP_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def apply_globals(args):
    """gpubench's process-wide settings (src/strategy/precision.rs)."""
    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = args.cudnn_benchmark and not args.deterministic
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True)
