"""Language and translation models: recurrent LMs and Transformers, as their reference code builds them.

Token ids are int64 inputs; the batch dimension is the symbol "N". A sample is one sequence of the
stated length (for the word LMs: one column of a `bptt`-long chunk).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from catalog.builder import GraphBuilder, Tensor


def _token_ids(b: GraphBuilder, name: str, shape: list[int | str]) -> Tensor:
    return Tensor(b.input(name, shape, TensorProto.INT64).name, len(shape), 0)


def _sinusoid_table(positions: int, width: int) -> np.ndarray:
    """Frozen sinusoid position table: a constant, not a parameter."""
    angles = np.arange(positions)[:, None] / np.power(10000, 2 * (np.arange(width) // 2) / width)
    angles[:, 0::2], angles[:, 1::2] = np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])
    return angles.astype(np.float32)


def _constant_rows(b: GraphBuilder, table: np.ndarray) -> Tensor:
    name = b.op("Constant", [], value=onnx.numpy_helper.from_array(table))
    return Tensor(name, 2, table.shape[1])


def word_lstm_lm(*, vocabulary: int, embedding: int, hidden: int, layers: int, bptt: int) -> onnx.ModelProto:
    """pytorch/examples word_language_model RNNModel('LSTM'), untied: embedding, LSTM, decoder."""
    b = GraphBuilder("lstm-lm")
    ids = _token_ids(b, "tokens", [bptt, "N"])  # time-major, as the example feeds it
    x = b.lstm(b.embedding(ids, vocabulary, embedding), hidden, layers=layers)
    return b.model([b.linear(x, vocabulary)])


def word_transformer_lm(
    *, vocabulary: int, width: int, heads: int, feedforward: int, layers: int, bptt: int
) -> onnx.ModelProto:
    """pytorch/examples word_language_model TransformerModel: post-norm encoder layers, ReLU FFN."""
    b = GraphBuilder("transformer-lm")
    ids = _token_ids(b, "tokens", ["N", bptt])
    x = b.scale(b.embedding(ids, vocabulary, width), width**0.5)
    x = b.add(x, _constant_rows(b, _sinusoid_table(bptt, width)))
    causal = _constant_rows(b, np.triu(np.full((bptt, bptt), -np.inf, np.float32), 1))
    for _ in range(layers):
        attended = b.multi_head_attention(x, x, heads=heads, seq_q=bptt, seq_kv=bptt, mask=causal)
        x = b.layer_norm(b.add(x, attended))
        x = b.layer_norm(b.add(x, b.linear(b.act(b.linear(x, feedforward)), width)))
    return b.model([b.linear(x, vocabulary)])


def translation_transformer(
    *,
    source_vocabulary: int,
    target_vocabulary: int,
    width: int,
    inner: int,
    heads: int,
    layers: int,
    source_length: int,
    target_length: int,
    max_length: int,
) -> onnx.ModelProto:
    """attention-is-all-you-need-pytorch (the version Gavel ships): post-norm encoder-decoder,
    Conv1d(k=1) feed-forward, frozen sinusoid positions, target projection tied to the target
    embedding (-proj_share_weight)."""
    b = GraphBuilder("transformer")
    positions = _sinusoid_table(max_length + 1, width)

    def embed(name: str, length: int, vocabulary: int) -> tuple[Tensor, str]:
        ids = _token_ids(b, f"{name}_seq", ["N", length])
        pos = _token_ids(b, f"{name}_pos", ["N", length])
        with b.scope(f"{name}_embedding"):
            table = b.weight([vocabulary, width])
        words = Tensor(b.op("Gather", [table, ids.name]), 3, width)
        position_rows = b.op("Gather", [_constant_rows(b, positions).name, pos.name])
        return b.add(words, Tensor(position_rows, 3, width)), table

    def feed_forward(x: Tensor) -> Tensor:
        y = b.pointwise_conv1d(b.act(b.pointwise_conv1d(x, inner)), width)
        return b.layer_norm(b.add(x, y))

    def attention(query: Tensor, memory: Tensor, seq_q: int, seq_kv: int) -> Tensor:
        attended = b.multi_head_attention(query, memory, heads=heads, seq_q=seq_q, seq_kv=seq_kv)
        return b.layer_norm(b.add(query, attended))

    encoded, _ = embed("source", source_length, source_vocabulary)
    for _ in range(layers):
        encoded = feed_forward(attention(encoded, encoded, source_length, source_length))
    decoded, target_table = embed("target", target_length, target_vocabulary)
    for _ in range(layers):
        decoded = attention(decoded, decoded, target_length, target_length)
        decoded = feed_forward(attention(decoded, encoded, target_length, source_length))
    projection = b.op("Transpose", [target_table], perm=[1, 0])  # the tied embedding, as [width, vocab]
    logits = Tensor(b.op("MatMul", [decoded.name, projection]), 3, target_vocabulary)
    return b.model([b.scale(logits, width**-0.5)])


def gpt2(
    *, vocabulary: int, positions: int, width: int, heads: int, layers: int, sequence: int
) -> onnx.ModelProto:
    """Hugging Face GPT2LMHeadModel: pre-norm blocks, GELU MLP (4×), LM head tied to the token table."""
    b = GraphBuilder("gpt2")
    ids = _token_ids(b, "tokens", ["N", sequence])
    with b.scope("wte"):
        token_table = b.weight([vocabulary, width])
    x = Tensor(b.op("Gather", [token_table, ids.name]), 3, width)
    position_ids = b.constant(list(range(sequence)))
    x = b.add(x, Tensor(b.op("Gather", [b.weight([positions, width]), position_ids]), 2, width))
    causal = _constant_rows(b, np.triu(np.full((sequence, sequence), -np.inf, np.float32), 1))
    for _ in range(layers):
        normed = b.layer_norm(x)
        x = b.add(
            x,
            b.multi_head_attention(normed, normed, heads=heads, seq_q=sequence, seq_kv=sequence, mask=causal),
        )
        x = b.add(x, b.linear(b.act(b.linear(b.layer_norm(x), 4 * width), "Gelu"), width))
    x = b.layer_norm(x)
    head = b.op("Transpose", [token_table], perm=[1, 0])
    return b.model([Tensor(b.op("MatMul", [x.name, head]), 3, vocabulary)])


def _bert_encoder(
    b: GraphBuilder,
    *,
    vocabulary: int,
    positions: int,
    width: int,
    heads: int,
    layers: int,
    inner: int,
    sequence: int,
) -> tuple[Tensor, str]:
    """BERT embeddings (word + position + token type, layer norm) and post-norm GELU encoder layers.
    Returns the sequence output and the word table's name (tied heads reuse it)."""
    ids = _token_ids(b, "tokens", ["N", sequence])
    with b.scope("word_embeddings"):
        word_table = b.weight([vocabulary, width])
    x = Tensor(b.op("Gather", [word_table, ids.name]), 3, width)
    position_ids, type_ids = b.constant(list(range(sequence))), b.constant([0] * sequence)
    x = b.add(x, Tensor(b.op("Gather", [b.weight([positions, width]), position_ids]), 2, width))
    x = b.add(x, Tensor(b.op("Gather", [b.weight([2, width]), type_ids]), 2, width))
    x = b.layer_norm(x)
    for _ in range(layers):
        x = b.layer_norm(b.add(x, b.multi_head_attention(x, x, heads=heads, seq_q=sequence, seq_kv=sequence)))
        x = b.layer_norm(b.add(x, b.linear(b.act(b.linear(x, inner), "Gelu"), width)))
    return x, word_table


def bert_mlm(
    *, vocabulary: int, positions: int, width: int, heads: int, layers: int, inner: int, sequence: int
) -> onnx.ModelProto:
    """Hugging Face BertForMaskedLM: the encoder and an MLM head tied to the word table."""
    b = GraphBuilder("bert")
    x, word_table = _bert_encoder(
        b,
        vocabulary=vocabulary,
        positions=positions,
        width=width,
        heads=heads,
        layers=layers,
        inner=inner,
        sequence=sequence,
    )
    x = b.layer_norm(b.act(b.linear(x, width), "Gelu"))
    decoder = b.op("Transpose", [word_table], perm=[1, 0])
    logits = Tensor(b.op("MatMul", [x.name, decoder]), 3, vocabulary)
    return b.model([b.add(logits, Tensor(b.weight([vocabulary]), 1, vocabulary))])


def bert_classifier(*, layers: int, width: int, heads: int, sequence: int, name: str) -> onnx.ModelProto:
    """TensorFlow's BERT text-classification tutorial: a TF-Hub BERT encoder (uncased vocabulary
    30,522, 512 positions, feed-forward 4× wide), its tanh pooler on [CLS], and a 1-unit dense head."""
    b = GraphBuilder(name)
    x, _ = _bert_encoder(
        b,
        vocabulary=30522,
        positions=512,
        width=width,
        heads=heads,
        layers=layers,
        inner=4 * width,
        sequence=sequence,
    )
    first = Tensor(b.op("Gather", [x.name, b.constant(0)], axis=1), 2, width)  # the [CLS] position
    pooled = b.act(b.linear(first, width), "Tanh")
    return b.model([b.linear(pooled, 1)])
