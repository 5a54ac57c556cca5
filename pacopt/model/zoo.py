"""Models defined in pacopt's own code, to profile into job graphs (no downloads).

Each builder in :data:`ZOO` returns ``(model, example_input)``. Two kinds:
- small examples (``cnn``, ``resnet``, ``transformer``), sized so that one training step takes
  tens to hundreds of ms on an A100 (PipeDream's graphs: 90-760 ms) with at most ~80 ops;
- the trace workloads' models that PipeDream has no profile of (``bert``, ``gpt2``,
  ``deepspeech2``), at their published sizes: BERT-base, GPT-2 small and DeepSpeech2 as
  deepspeech.pytorch defines it (the implementation AdaptDL's and ElasticFlow's benchmarks
  train); ``docs/traces.md`` gives their sizes and step times.
Builders are deterministic (fixed seed, global RNG untouched), although profiles depend only on
shapes anyway. ``examples/make_graphs.py`` writes their graphs to ``examples/graphs/``.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable

from pacopt.infra.extras import require

# torch is the learned extra's: without it, importing this module is one line naming the extra
require("learned", "torch", "profiling the models pacopt defines (pacopt.model.zoo)")

import torch
from torch import nn

from pacopt.model.graph import JobGraph
from pacopt.model.profiler import profile_model


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


class BertLayer(nn.Module):
    """BERT's post-norm encoder layer: attention, add and norm, then a GELU MLP, add and norm.
    (Dropout is left out: in the eval-mode profile it is a view and costs nothing.)"""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attn = SelfAttention(dim, heads)
        self.norm1 = nn.LayerNorm(dim, eps=1e-12)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.fc2(self.act(self.fc1(x))))


class BertClassifier(nn.Module):
    """BERT-base (Devlin et al. 2019: 12 layers, 768 wide, 12 heads, 3072 MLP, 30522 word pieces,
    512 positions, 110M parameters) with its pooler and a two-class head: sequence
    classification, the fine-tuning task (CoLA) ElasticFlow's BERT jobs run."""

    def __init__(self, vocab: int = 30522, tokens: int = 128, dim: int = 768, heads: int = 12,
                 hidden: int = 3072, layers: int = 12, positions: int = 512,
                 classes: int = 2) -> None:
        super().__init__()
        self.tokens = tokens
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(1, positions, dim))
        self.token_type = nn.Parameter(torch.zeros(2, dim))
        self.norm = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.Sequential(*(BertLayer(dim, heads, hidden) for _ in range(layers)))
        self.pool = nn.Linear(dim, dim)
        self.pool_act = nn.Tanh()
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # every token has segment 0: one row of the token-type table (a view, no op)
        x = self.word(tokens) + self.position[:, :self.tokens] + self.token_type[0]
        x = self.layers(self.norm(x))
        return self.head(self.pool_act(self.pool(x[:, 0])))


class CausalSelfAttention(SelfAttention):
    """:class:`SelfAttention` with GPT-2's causal mask (a constant added to the scores)."""

    def __init__(self, dim: int, heads: int, tokens: int) -> None:
        super().__init__(dim, heads)
        mask = torch.full((tokens, tokens), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale + self.mask
        weights = torch.softmax(scores, dim=-1)
        return self.proj(torch.matmul(weights, v).transpose(1, 2).flatten(2))


class Gpt2Block(nn.Module):
    """GPT-2's pre-norm decoder block: masked attention and a GELU MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, tokens: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, tokens)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class Gpt2(nn.Module):
    """GPT-2 small (Radford et al. 2019: 12 layers, 768 wide, 12 heads, 50257 tokens, a
    1024-token context, 124M parameters) with its language-model head tied to the token
    embedding."""

    def __init__(self, vocab: int = 50257, tokens: int = 1024, dim: int = 768, heads: int = 12,
                 layers: int = 12) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Parameter(torch.zeros(1, tokens, dim))
        self.blocks = nn.Sequential(*(Gpt2Block(dim, heads, tokens) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.blocks(self.wte(tokens) + self.wpe))
        return nn.functional.linear(x, self.wte.weight)  # the tied head


class SequenceBatchNorm(nn.Module):
    """BatchNorm1d over the features of a (time, batch, features) sequence, statistics over
    time and batch (deepspeech.pytorch's ``SequenceWise(BatchNorm1d)``)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(1, 2, 0)).permute(2, 0, 1)


class BatchRNN(nn.Module):
    """One DeepSpeech2 recurrent layer: (batch norm,) a bidirectional LSTM, the two directions
    summed."""

    def __init__(self, inputs: int, hidden: int, batch_norm: bool = True) -> None:
        super().__init__()
        self.norm = SequenceBatchNorm(inputs) if batch_norm else None
        self.rnn = nn.LSTM(inputs, hidden, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is not None:
            x = self.norm(x)
        return self.rnn(x)[0].unflatten(-1, (2, -1)).sum(-2)


class DeepSpeech2(nn.Module):
    """DeepSpeech2 (Amodei et al. 2016) as deepspeech.pytorch defines it, the implementation
    AdaptDL's and ElasticFlow's benchmarks train: two 2D convolutions (32 channels, 41x11 and
    21x11, batch norm, hardtanh), five bidirectional LSTM layers of 1024, a batch norm and a
    linear layer to 29 characters; on 161-bin spectrograms (20 ms windows, 10 ms hop)."""

    def __init__(self, freq: int = 161, hidden: int = 1024, layers: int = 5,
                 chars: int = 29) -> None:
        super().__init__()
        self.conv = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(1, 32, (41, 11), stride=(2, 2), padding=(20, 5))),
            ("bn1", nn.BatchNorm2d(32)), ("act1", nn.Hardtanh(0, 20)),
            ("conv2", nn.Conv2d(32, 32, (21, 11), stride=(2, 1), padding=(10, 5))),
            ("bn2", nn.BatchNorm2d(32)), ("act2", nn.Hardtanh(0, 20)),
        ]))
        features = 32 * ((((freq + 40 - 41) // 2 + 1) + 20 - 21) // 2 + 1)
        self.rnns = nn.Sequential(*(BatchRNN(features if i == 0 else hidden, hidden, i > 0)
                                    for i in range(layers)))
        self.norm = SequenceBatchNorm(hidden)
        self.fc = nn.Linear(hidden, chars, bias=False)

    def forward(self, spectrogram: torch.Tensor) -> torch.Tensor:
        # (batch, 1, freq, time) -> (time, batch, channels x freq)
        x = self.conv(spectrogram).flatten(1, 2).permute(2, 0, 1)
        return self.fc(self.norm(self.rnns(x)))


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


@_seeded
def bert_base(batch_size: int = 64, tokens: int = 128) -> tuple[nn.Module, torch.Tensor]:
    """:class:`BertClassifier` (BERT-base) on a batch of 128-token sequences: ElasticFlow's
    smaller BERT batch (64)."""
    model = BertClassifier(tokens=tokens)
    return model, torch.randint(model.word.num_embeddings, (batch_size, tokens))


@_seeded
def gpt2_small(batch_size: int = 8, tokens: int = 1024) -> tuple[nn.Module, torch.Tensor]:
    """:class:`Gpt2` (GPT-2 small) on a batch of 8 sequences of its full 1024-token context."""
    model = Gpt2(tokens=tokens)
    return model, torch.randint(model.wte.num_embeddings, (batch_size, tokens))


@_seeded
def deepspeech2(batch_size: int = 32, frames: int = 601) -> tuple[nn.Module, torch.Tensor]:
    """:class:`DeepSpeech2` on a batch of 32 six-second utterances (601 spectrogram frames):
    ElasticFlow's smaller DeepSpeech2 batch (32)."""
    return DeepSpeech2(), torch.randn(batch_size, 1, 161, frames)


#: Model name -> builder returning ``(model, example_input)``.
ZOO: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "cnn": small_cnn,
    "resnet": resnet_style,
    "transformer": transformer_encoder,
    "bert": bert_base,
    "gpt2": gpt2_small,
    "deepspeech2": deepspeech2,
}


def profile_zoo_model(name: str) -> JobGraph:
    """The job graph of the zoo model ``name``, as bundled in ``examples/graphs/<name>.json``."""
    model, example_input = ZOO[name]()
    return profile_model(model, example_input, name)
