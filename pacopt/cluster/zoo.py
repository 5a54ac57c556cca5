"""Example models defined in pacopt's own code, to profile into job graphs (no downloads).

Each builder in :data:`ZOO` returns ``(model, example_input)``, sized so that one training step
takes tens to hundreds of ms on an A100 (PipeDream's graphs: 90-760 ms) with at most ~80 ops.
Builders are deterministic (fixed seed, global RNG untouched), although profiles depend only on
shapes anyway. ``examples/make_graphs.py`` writes their graphs to ``examples/graphs/``.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import nn

from pacopt.cluster.graph import JobGraph
from pacopt.cluster.profiler import profile_model


class SmallCNN(nn.Module):
    """An AlexNet-like stack: five convolutions with ReLU and max pooling, three linear layers."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(3, 64, 11, stride=4, padding=2)), ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(3, stride=2)),
            ("conv2", nn.Conv2d(64, 192, 5, padding=2)), ("relu2", nn.ReLU()),
            ("pool2", nn.MaxPool2d(3, stride=2)),
            ("conv3", nn.Conv2d(192, 384, 3, padding=1)), ("relu3", nn.ReLU()),
            ("conv4", nn.Conv2d(384, 256, 3, padding=1)), ("relu4", nn.ReLU()),
            ("conv5", nn.Conv2d(256, 256, 3, padding=1)), ("relu5", nn.ReLU()),
            ("pool5", nn.MaxPool2d(3, stride=2)),
        ]))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(OrderedDict([
            ("drop6", nn.Dropout()), ("fc6", nn.Linear(256 * 6 * 6, 4096)), ("relu6", nn.ReLU()),
            ("drop7", nn.Dropout()), ("fc7", nn.Linear(4096, 4096)), ("relu7", nn.ReLU()),
            ("fc8", nn.Linear(4096, num_classes)),
        ]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions plus a (projected, if the shape changes) skip."""

    def __init__(self, in_channels: int, channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        skip = x if self.downsample is None else self.downsample(x)
        return self.relu(out + skip)


class ResNetStyle(nn.Module):
    """A small ResNet: a ResNet stem, then stages of basic blocks, then pooling and a classifier."""

    def __init__(self, widths: tuple[int, ...] = (64, 128, 256), blocks_per_stage: int = 2,
                 num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(OrderedDict([
            ("conv", nn.Conv2d(3, widths[0], 7, stride=2, padding=3, bias=False)),
            ("bn", nn.BatchNorm2d(widths[0])), ("relu", nn.ReLU()),
            ("pool", nn.MaxPool2d(3, stride=2, padding=1)),
        ]))
        stages = []
        in_channels = widths[0]
        for i, width in enumerate(widths):
            blocks = [BasicBlock(in_channels if b == 0 else width, width, 2 if i and b == 0 else 1)
                      for b in range(blocks_per_stage)]
            stages.append(nn.Sequential(*blocks))
            in_channels = width
        self.stages = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.stages(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


class SelfAttention(nn.Module):
    """Multi-head self attention from Linear, matmul and softmax (so fx traces it op by op)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (batch, tokens, 3 * dim) -> (3, batch, heads, tokens, head dim); unflatten and flatten
        # need no sizes, which would otherwise add size ops to the graph
        qkv = self.qkv(x).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
        return self.proj(torch.matmul(weights, v).transpose(1, 2).flatten(2))


class EncoderLayer(nn.Module):
    """A pre-norm Transformer encoder layer: attention and an MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class TransformerEncoder(nn.Module):
    """Token and learned position embeddings, encoder layers, then per-token vocabulary logits."""

    def __init__(self, vocab: int = 8000, tokens: int = 128, dim: int = 512, heads: int = 8,
                 hidden: int = 2048, layers: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(1, tokens, dim))
        self.layers = nn.Sequential(*(EncoderLayer(dim, heads, hidden) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.embed(tokens) + self.position)
        return self.head(self.norm(x))


def _seeded(build: Callable[..., tuple[nn.Module, torch.Tensor]]):
    """Run a builder with a fixed seed, leaving the caller's RNG state as it was."""

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return build(*args, **kwargs)

    return wrapper


@_seeded
def small_cnn(batch_size: int = 256) -> tuple[nn.Module, torch.Tensor]:
    """:class:`SmallCNN` on a batch of 224x224 RGB images."""
    return SmallCNN(), torch.randn(batch_size, 3, 224, 224)


@_seeded
def resnet_style(batch_size: int = 256) -> tuple[nn.Module, torch.Tensor]:
    """:class:`ResNetStyle` on a batch of 224x224 RGB images."""
    return ResNetStyle(), torch.randn(batch_size, 3, 224, 224)


@_seeded
def transformer_encoder(batch_size: int = 128) -> tuple[nn.Module, torch.Tensor]:
    """:class:`TransformerEncoder` on a batch of 128-token sequences."""
    model = TransformerEncoder()
    return model, torch.randint(model.embed.num_embeddings, (batch_size, model.position.shape[1]))


#: Example model name -> builder returning ``(model, example_input)``.
ZOO: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "cnn": small_cnn,
    "resnet": resnet_style,
    "transformer": transformer_encoder,
}


def profile_zoo_model(name: str) -> JobGraph:
    """The job graph of the zoo model ``name``, as bundled in ``examples/graphs/<name>.json``."""
    model, example_input = ZOO[name]()
    return profile_model(model, example_input, name)
