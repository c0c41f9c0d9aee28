"""A BERT-family encoder as an ONNX graph, built from its weights with ``onnx.helper``: no torch.

The graph is the one ONNX Runtime's BERT optimizer makes of the traced torch encoder
(:func:`memnets.nn.onnx_encoder.export_onnx`): ``EmbedLayerNormalization`` (word + position +
token-type embeddings and their LayerNorm, and the mask's lengths), per layer a fused ``Attention``
node, its output projection, residual Add + LayerNormalization, the feed-forward MatMul + Add +
``Gelu`` + MatMul + Add and the second residual LayerNorm (the residual LayerNorms and GELU left
unfused, :data:`memnets.nn.onnx_runtime.UNFUSED`); then mean pooling over the mask, an optional
linear layer, and optionally L2 normalisation. The MatMuls carry the names of the traced graph
(``/encoder/layer.N/output/dense/MatMul``), so that int8 quantisation leaves the same nodes in float32
(:data:`memnets.nn.onnx_runtime.INT8_SETTINGS`).

One builder serves the memory encoder (all layers, mean pooling, projection, normalised) and the
change judge (its first layers, mean pooling, one logit). Padding must be on the right (the
``Attention`` node reads each row's length from the mask).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

GRAPH_VERSION = 1  # part of every cached graph's name: bump it when what this module builds changes
MS_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class BertShape:
    """What the builder needs of a backbone's ``config.json``."""

    layers: int
    heads: int
    hidden: int
    eps: float

    @classmethod
    def of(cls, config: Mapping, layers: int | None = None) -> BertShape:
        if config.get("model_type") != "bert":
            raise ValueError(
                f"the torch-free encoder builds BERT backbones only, this one is {config.get('model_type')!r}"
            )
        if (
            config.get("hidden_act", "gelu") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise ValueError("the torch-free encoder builds BERT with GELU and absolute positions only")
        depth = int(config["num_hidden_layers"])
        return cls(depth if layers is None else int(layers), int(config["num_attention_heads"]),
                   int(config["hidden_size"]), float(config.get("layer_norm_eps", 1e-12)))  # fmt: skip


def bert_graph(
    weights: Mapping[str, np.ndarray],
    shape: BertShape,
    *,
    head: tuple[np.ndarray, np.ndarray] | None = None,
    normalize: bool = True,
    pooling_floor: float = 1e-9,
    token_types: bool = False,
    output: str = "embedding",
):
    """The ONNX model (``onnx.ModelProto``) of ``shape.layers`` BERT layers over ``weights`` (Hugging Face
    names, e.g. ``embeddings.word_embeddings.weight``, ``encoder.layer.0.attention.self.query.weight``).

    Inputs int64 ``input_ids`` and ``attention_mask`` ``[batch, tokens]`` (and ``token_type_ids`` when
    ``token_types``; otherwise every token is of type 0). Output ``output``: the mean of the last hidden
    states over the mask (its count floored at ``pooling_floor``), times ``head``'s ``(weight [out, in],
    bias [out])`` when given, L2-normalised when ``normalize``.
    """
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []

    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str, domain: str = "", **attrs) -> str:
        out = f"{name}_output_0"
        nodes.append(helper.make_node(op, inputs, [out], name=name, domain=domain, **attrs))
        return out

    def linear(x: str, prefix: str, name: str) -> str:
        w = const(f"{prefix}.weight", np.asarray(weights[f"{prefix}.weight"], np.float32).T)
        b = const(f"{prefix}.bias", np.asarray(weights[f"{prefix}.bias"], np.float32))
        return node("Add", [node("MatMul", [x, w], f"{name}/MatMul"), b], f"{name}/Add")

    def layer_norm(x: str, prefix: str, name: str) -> str:
        g = const(f"{prefix}.weight", np.asarray(weights[f"{prefix}.weight"], np.float32))
        b = const(f"{prefix}.bias", np.asarray(weights[f"{prefix}.bias"], np.float32))
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=shape.eps)

    ids = node("Cast", ["input_ids"], "/ids/Cast", to=TensorProto.INT32)
    mask = node("Cast", ["attention_mask"], "/mask/Cast", to=TensorProto.INT32)
    if token_types:
        types = node("Cast", ["token_type_ids"], "/types/Cast", to=TensorProto.INT32)
    else:
        types = node("Mul", [ids, const("zero_int32", np.array(0, np.int32))], "/types/Zeros")
    embed = [
        const(f"embeddings.{part}.weight", np.asarray(weights[f"embeddings.{part}.weight"], np.float32))
        for part in ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm")
    ]
    embed.append(const("embeddings.LayerNorm.bias", np.asarray(weights["embeddings.LayerNorm.bias"], np.float32)))
    nodes.append(
        helper.make_node(
            "EmbedLayerNormalization",
            [ids, types, *embed, mask],
            ["embedded", "mask_index"],
            name="EmbedLayerNormalization_0",
            domain=MS_DOMAIN,
            epsilon=shape.eps,
        )
    )
    hidden = "embedded"
    for i in range(shape.layers):
        p, n = f"encoder.layer.{i}", f"/encoder/layer.{i}"
        qkv = [f"{p}.attention.self.{part}" for part in ("query", "key", "value")]
        qkv_w = np.concatenate([np.asarray(weights[f"{q}.weight"], np.float32).T for q in qkv], axis=1)
        qkv_b = np.concatenate([np.asarray(weights[f"{q}.bias"], np.float32) for q in qkv])
        attended = node(
            "Attention",
            [hidden, const(f"{p}.qkv.weight", qkv_w), const(f"{p}.qkv.bias", qkv_b), "mask_index"],
            f"Attention_{i}",
            domain=MS_DOMAIN,
            num_heads=shape.heads,
        )
        projected = linear(attended, f"{p}.attention.output.dense", f"{n}/attention/output/dense")
        residual = node("Add", [projected, hidden], f"{n}/attention/output/Add")
        hidden = layer_norm(residual, f"{p}.attention.output.LayerNorm", f"{n}/attention/output/LayerNorm")
        widened = linear(hidden, f"{p}.intermediate.dense", f"{n}/intermediate/dense")
        activated = node("Gelu", [widened], f"Gelu_{i}", domain=MS_DOMAIN)
        narrowed = linear(activated, f"{p}.output.dense", f"{n}/output/dense")
        residual = node("Add", [narrowed, hidden], f"{n}/output/Add")
        hidden = layer_norm(residual, f"{p}.output.LayerNorm", f"{n}/output/LayerNorm")

    axis2, axis1 = const("axis_2", np.array([2], np.int64)), const("axis_1", np.array([1], np.int64))
    weight = node("Cast", [node("Unsqueeze", ["attention_mask", axis2], "/pool/Unsqueeze")], "/pool/Cast", to=1)
    summed = node("ReduceSum", [node("Mul", [hidden, weight], "/pool/Mul"), axis1], "/pool/Sum", keepdims=0)
    count = node("ReduceSum", [weight, axis1], "/pool/Count", keepdims=0)
    count = node("Max", [count, const("pooling_floor", np.array(pooling_floor, np.float32))], "/pool/Floor")
    result = node("Div", [summed, count], "/pool/Mean")
    if head is not None:
        w, b = head
        w = const("head.weight", np.asarray(w, np.float32).T)
        result = node("Add", [node("MatMul", [result, w], "/head/MatMul"), const("head.bias", np.asarray(b, np.float32))], "/head/Add")  # fmt: skip
    if normalize:
        norm = node("ReduceL2", [result], "/normalize/ReduceL2", axes=[-1], keepdims=1)
        norm = node("Max", [norm, const("norm_floor", np.array(1e-12, np.float32))], "/normalize/Floor")
        result = node("Div", [result, norm], "/normalize/Div")
    nodes[-1].output[0] = output
    inputs = ["input_ids", "attention_mask", *(["token_type_ids"] if token_types else [])]
    graph = helper.make_graph(
        nodes,
        "memnets-bert",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"]) for name in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", None])],
        inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, producer_name="memnets", ir_version=8)


__all__ = ["GRAPH_VERSION", "BertShape", "bert_graph"]
