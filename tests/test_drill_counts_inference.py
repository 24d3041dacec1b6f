"""``drill counts`` for inference (issue 23, item 6): every answer against a hand formula written out here,
the presets against their published sources, a named mistake with a unit slip beside it, bad config files."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from tutor.base.messages import use_language
from tutor.drills import inference
from tutor.drills.inference import PRESETS, Model, ModelError, read_config
from tutor.drills.record import count_tolerance, grade

L8 = PRESETS["llama-3.1-8b"]
L405 = PRESETS["llama-3.1-405b"]
MISTRAL = PRESETS["mistral-7b-v0.1"]
DSV2 = PRESETS["deepseek-v2"]

# --- the presets against their sources ---------------------------------------------------------------------

#: (name, layers, d_model, num_heads, num_kv_heads, head_dim, vocab, ffn_dim, context, window, d_c, d_h^R), as
#: published: Llama 3.1 -- Dubey et al. 2024 (arXiv:2407.21783) Table 3 and the models' config.json
#: (vocab_size 128256, max_position_embeddings 131072); Mistral 7B -- Jiang et al. 2023 (arXiv:2310.06825)
#: Table 1 (window_size 4096, context_len 8192, vocab_size 32000); DeepSeek-V2 -- arXiv:2405.04434 section
#: 3.1.2 (60 layers, 5120, 128 heads of 128, d_c 512, d_h^R 64), abstract (128K context), config.json
#: (vocab_size 102400).
SOURCES = [
    ("Llama-3.1-8B", 32, 4096, 32, 8, 128, 128256, 14336, 131072, None, None, None),
    ("Llama-3.1-70B", 80, 8192, 64, 8, 128, 128256, 28672, 131072, None, None, None),
    ("Llama-3.1-405B", 126, 16384, 128, 8, 128, 128256, 53248, 131072, None, None, None),
    ("Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 32000, 14336, 8192, 4096, None, None),
    ("DeepSeek-V2", 60, 5120, 128, 128, 128, 102400, None, 131072, None, 512, 64),
]


@pytest.mark.parametrize("row", SOURCES, ids=lambda r: r[0])
def test_every_preset_is_its_published_configuration(row):
    m = inference.preset(row[0])
    assert (m.name, m.num_layers, m.d_model, m.num_heads, m.num_kv_heads, m.head_dim, m.vocab_size, m.ffn_dim,
            m.context, m.sliding_window, m.kv_lora_rank, m.rope_head_dim) == row
    assert m.dtype == "bfloat16" and not m.tied_embeddings  # config.json: torch_dtype, tie_word_embeddings


def test_the_presets_are_the_ones_the_help_names():
    from tutor.base.catalogs.en import EN

    assert EN["cli.opt.model"].endswith(", ".join(m.name for m in list(PRESETS.values())[:-1]) + " or DeepSeek-V2.")


#: The parameters of each dense preset, summed over its checkpoint's tensors.  Llama-3.1-8B: 8,030,261,248, as
#: the sum of the tensors of its consolidated checkpoint (original/params.json's model).  The 70B and 405B
#: consolidated shards repeat a few tensors in every shard, which these counts do not: 70B's 8 shards each hold
#: the (2·80 + 1) RMSNorm weights of 8192 (7 copies too many: 70,562,938,880 − 7·161·8192), 405B's 16 shards
#: its norms and, with 8 K/V heads for 16 shards, W_K and W_V twice (410,143,424,512 − 15·253·16384 −
#: 126·2·16384·1024).  Mistral-7B-v0.1: 7,241,732,096, as transformers counts mistralai/Mistral-7B-v0.1 (7.24B).
PARAMETERS = {"Llama-3.1-8B": 8_030_261_248, "Llama-3.1-70B": 70_562_938_880 - 7 * 161 * 8192,
              "Llama-3.1-405B": 410_143_424_512 - 15 * 253 * 16384 - 126 * 2 * 16384 * 1024,
              "Mistral-7B-v0.1": 7_241_732_096}


@pytest.mark.parametrize("name", PARAMETERS)
def test_the_parameter_count_is_the_checkpoints(name):
    m = inference.preset(name)
    assert inference.parameters(m) == PARAMETERS[name]
    nominal = {"Llama-3.1-8B": 8e9, "Llama-3.1-70B": 70e9, "Llama-3.1-405B": 405e9, "Mistral-7B-v0.1": 7e9}[name]
    assert abs(PARAMETERS[name] - nominal) / nominal < 0.04  # the name says the size


@pytest.mark.parametrize("name", ["Llama-3.1-8B", "Mistral-7B-v0.1"])
def test_the_parameter_count_is_torchs_for_the_same_modules(name):
    """The same model built from torch modules on the meta device (no memory): every parameter counted."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    m = inference.preset(name)
    D, H, Hkv, d, F = m.d_model, m.num_heads, m.num_kv_heads, m.head_dim, m.ffn_dim

    def layer() -> nn.Module:
        return nn.ModuleDict({"q": nn.Linear(D, H * d, bias=False), "k": nn.Linear(D, Hkv * d, bias=False),
                              "v": nn.Linear(D, Hkv * d, bias=False), "o": nn.Linear(H * d, D, bias=False),
                              "gate": nn.Linear(D, F, bias=False), "up": nn.Linear(D, F, bias=False),
                              "down": nn.Linear(F, D, bias=False), "norm1": nn.RMSNorm(D), "norm2": nn.RMSNorm(D)})

    with torch.device("meta"):
        model = nn.ModuleList([nn.Embedding(m.vocab_size, D), *[layer() for _ in range(m.num_layers)], nn.RMSNorm(D),
                               nn.Linear(D, m.vocab_size, bias=False)])
    total = sum(p.numel() for p in model.parameters())
    assert inference.parameters(m) == total
    matrices = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("0."))
    assert inference.matrix_parameters(m) == matrices  # every Linear, the embedding table left out


def test_the_dtypes_bytes_are_torchs():
    torch = pytest.importorskip("torch")
    assert {k: torch.empty(0, dtype=getattr(torch, k)).element_size() for k in inference.DTYPES} == inference.DTYPES


def test_mla_caches_nine_halves_of_a_head_per_token_and_layer():
    """DeepSeek-V2, Table 1: MLA's cache is (d_c + d_h^R)·l elements, "≈ 9/2 d_h l" with d_c = 4d_h, d_h^R = d_h/2."""
    assert inference.kv_values_per_token(DSV2) == (512 + 64) * 60 == Fraction(9, 2) * 128 * 60


# --- every answer by a hand formula ------------------------------------------------------------------------------

#: Llama-3.1-8B's weight matrices, written out: per layer W_Q 4096·4096, W_K and W_V 4096·1024, W_O 4096·4096,
#: gate, up and down 4096·14336; the output head 128256·4096.
L8_MATRICES = 32 * (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 3 * 4096 * 14336) + 128256 * 4096
L8_KV_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 heads of 128, 2 bytes: 128 KiB


def test_llama_8b_by_hand():
    assert L8_MATRICES == 7_504_658_432 == inference.matrix_parameters(L8)
    assert L8_KV_TOKEN == 131_072 == inference.kv_values_per_token(L8) * 2


def _ask(maker, m: Model, seed: int = 0, **sizes):
    return maker(m, random.Random(seed), "t", **sizes)


def test_decode_flops_bytes_intensity_and_time_by_hand():
    B, L = 8, 4096
    flops = 2 * L8_MATRICES + 4 * 32 * 32 * 128 * L  # 2 per matrix parameter; Q·Kᵀ and weights·V over L tokens
    read = 2 * L8_MATRICES + B * L * L8_KV_TOKEN  # the weights once, every sequence's cache
    q = _ask(inference.decode_question, L8, part="flops", B=B, L=L)
    assert q.answer == flops == 17_156_800_512
    q = _ask(inference.decode_question, L8, part="bytes", B=B, L=L)
    assert q.answer == read == 19_304_284_160
    q = _ask(inference.decode_question, L8, part="intensity", B=B, L=L)
    assert q.answer == Fraction(B * flops, read) and 7 < q.answer < 8  # memory-bound: a few FLOPs per byte
    q = _ask(inference.decode_question, L8, part="time", B=B, L=L, bandwidth=3350)
    assert q.answer == Fraction(read, 3350 * 10**9) * 1000 and q.answer_text == "5.762 ms"


def test_prefill_flops_and_intensity_by_hand():
    B, P = 4, 8192
    flops = 2 * L8_MATRICES * P + 4 * 32 * 32 * 128 * P * P
    q = _ask(inference.prefill_question, L8, part="flops", B=B, P=P)
    assert q.answer == flops
    q = _ask(inference.prefill_question, L8, part="intensity", B=B, P=P)
    assert q.answer == Fraction(B * flops, 2 * L8_MATRICES + B * P * L8_KV_TOKEN) == 32768  # compute-bound


def test_paged_attention_by_hand():
    """175 tokens in blocks of 32: 6 blocks, 17 slots empty; 60 GiB holds ⌊60·2^30 / (192·128 KiB)⌋ requests."""
    q = _ask(inference.paged_question, L8, part="blocks", block_size=32, tokens=175)
    assert q.answer == 6
    q = _ask(inference.paged_question, L8, part="waste", block_size=32, tokens=175)
    assert q.answer == (6 * 32 - 175) * L8_KV_TOKEN == 17 * 131_072
    q = _ask(inference.paged_question, L8, part="fit", block_size=32, tokens=175, memory_gib=60)
    assert q.answer == 60 * 2**30 // (192 * 131_072) == 2560
    assert {v.key: v.value for v in q.variants}["drill.infer.paged.no_rounding"] == 60 * 2**30 // (175 * 131_072)


def test_the_mla_sliding_window_and_quantized_caches_by_hand():
    q = _ask(inference.mla_question, DSV2, B=8, L=32768)
    assert q.answer == 8 * 32768 * 60 * (512 + 64) * 2 == 18_119_393_280
    q = _ask(inference.window_question, MISTRAL, B=4, L=8192)  # Mistral's own window, 4096
    assert q.answer == 2 * 32 * 4 * 4096 * 8 * 128 * 2 and q.config["sliding_window"] == 4096
    assert "Every layer attends" in q.prompt
    q = _ask(inference.quant_question, L405, B=4, L=2048, bits=4, group=128)
    values = 2 * 126 * 4 * 2048 * 8 * 128
    assert q.answer == values // 2 + values // 128 * 2 == 1_089_994_752  # half a byte each, a float16 per 128


def test_a_128k_context_is_asked():
    lengths = {q.config.get("L") for s in range(40) for q in inference.questions(s, 3, ("decode",), L405)}
    assert 131072 in lengths
    q = _ask(inference.decode_question, L405, part="bytes", B=1, L=131072)
    assert q.answer == 2 * inference.matrix_parameters(L405) + 131072 * 2 * 126 * 8 * 128 * 2


# --- grading: every mistake named, a mistake with a unit slip -------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", inference.INFERENCE)
def test_every_named_mistake_is_recognised_and_the_answer_is_right(kind, seed):
    q = inference.questions(seed, 1, (kind,))[0]
    assert grade(q, q.answer_text.split(" (")[0]).outcome == "correct"
    assert grade(q, f"{float(q.answer):.6e}").outcome == "correct"
    if count_tolerance(q):
        assert grade(q, f"{float(q.answer) * 1.005:.6e}").outcome == "correct"
    assert grade(q, f"{float(q.answer) * 1.05:.6e}").outcome == "wrong"
    values = [v.value for v in q.variants]
    assert q.answer not in values and len(set(values)) == len(values)
    for v in q.variants:
        verdict = grade(q, f"{float(v.value):.9e}")
        assert verdict.outcome == "wrong" and v.key in (verdict.diagnosis, *verdict.also), (v.key, verdict)


def _said(q, typed):
    v = grade(q, typed)
    return v.outcome, v.diagnosis, v.also, " ".join(v.details)


def test_the_mla_latent_counted_twice_written_in_gb_names_both():
    """The issue's mix: the answer in GB where GiB was asked, AND a mistake -- both named."""
    q = _ask(inference.mla_question, DSV2, B=8, L=32768)
    twice = 2 * q.answer
    typed = f"{float(Fraction(twice, 2**30)):.4f} GB"  # 33.75 GiB, written as GB
    outcome, diagnosis, also, said = _said(q, typed)
    assert (outcome, diagnosis, also) == ("wrong", "drill.infer.mla.two", ("drill.count.slip.unit",))
    assert "counts the latent twice" in said and "written with GB" in said


def test_the_uncapped_window_in_gb_names_both():
    q = _ask(inference.window_question, MISTRAL, B=4, L=8192)
    typed = f"{float(Fraction(2 * q.answer, 2**30)):.3f} GB"
    outcome, diagnosis, also, said = _said(q, typed)
    assert (outcome, diagnosis, also) == ("wrong", "drill.infer.window.uncapped", ("drill.count.slip.unit",))


def test_the_cache_left_out_of_the_bytes_read_in_elements_names_both():
    q = _ask(inference.decode_question, L8, part="bytes", B=8, L=4096)
    outcome, diagnosis, also, said = _said(q, str(L8_MATRICES))  # the weights' elements, not their bytes
    assert (outcome, diagnosis, also) == ("wrong", "drill.infer.decode.no_kv", ("drill.count.slip.elements",))
    assert "number of elements" in said or "counts elements" in said


def test_a_time_in_seconds_is_named_and_takes_no_unit_slip():
    q = _ask(inference.decode_question, L8, part="time", B=8, L=4096, bandwidth=3350)
    assert _said(q, "0.005762")[:3] == ("wrong", "drill.infer.decode.seconds", ())
    assert grade(q, "5.76 ms").outcome == "correct" and grade(q, "5.762").outcome == "correct"
    assert _said(q, f"{float(q.answer) * 10**9 / 2**30:.4f}")[1] == "drill.infer.decode.gib_bandwidth"


def test_the_int4_scales_left_out_in_gb_names_both():
    q = _ask(inference.quant_question, L405, B=4, L=2048, bits=4, group=128)
    no_scales = next(v.value for v in q.variants if v.key == "drill.infer.quant.no_scales")
    typed = f"{float(Fraction(no_scales, 2**30)):.4f} GB"
    assert _said(q, typed)[:3] == ("wrong", "drill.infer.quant.no_scales", ("drill.count.slip.unit",))


def test_the_verdict_on_a_ratio_shows_its_decimals():
    q = _ask(inference.decode_question, L8, part="intensity", B=8, L=4096)
    v = grade(q, "13")
    assert v.outcome == "wrong" and v.message == "It is 7.11."  # 7.110049…, to 4 figures


# --- models: a preset by name, a file of one's own ---------------------------------------------------------------


def test_a_preset_is_found_whatever_its_case_and_an_unknown_one_names_the_presets():
    assert inference.preset("llama-3.1-70b ") is PRESETS["llama-3.1-70b"]
    with pytest.raises(ModelError) as info:
        inference.preset("GPT-5")
    assert "\n" not in str(info.value) and "Llama-3.1-405B" in str(info.value)


def test_with_a_model_every_question_uses_its_sizes_and_skips_what_it_lacks():
    qs = inference.questions(3, 30, None, DSV2)
    assert {q.topic for q in qs} == {"paged", "mla"}  # MoE: no dense parameter count; MLA: no K/V heads
    qs = inference.questions(3, 30, None, L405)
    assert {q.topic for q in qs} == set(inference.KINDS) - {"mla"}
    assert all(q.config.get("num_heads") == 128 for q in qs)
    with pytest.raises(ModelError):
        inference.questions(3, 1, ("decode",), DSV2)


def test_an_mla_config_of_ones_own_is_asked_its_latent_cache_and_no_decode(tmp_path):
    m = read_config(_config(tmp_path, GOOD + "kv_lora_rank: 64\nrope_head_dim: 16\n"))
    assert m.mla and inference.kv_values_per_token(m) == 4 * (64 + 16)
    assert {q.topic for q in inference.questions(1, 20, None, m)} == {"paged", "mla"}
    with pytest.raises(ModelError, match="caches MLA's latent"):
        inference.questions(1, 1, ("decode",), m)


def test_a_model_without_ffn_dim_has_no_decode(tmp_path):
    m = read_config(_config(tmp_path, GOOD.replace("ffn_dim: 1024\n", "")))
    with pytest.raises(ModelError, match="no dense feed-forward width"):
        inference.questions(1, 1, ("prefill",), m)
    assert {q.topic for q in inference.questions(1, 30, None, m)} == set(inference.KINDS) - {"prefill", "decode", "mla"}


@pytest.mark.parametrize("seed", range(25))
def test_any_sizes_a_file_allows_give_questions_whose_answers_grade(seed):
    """Small and odd sizes (a context of 1 token, one head, head_dim 1): every kind the model has is asked."""
    rng = random.Random(seed)
    H = rng.choice((1, 2, 3, 12))
    m = Model("odd", rng.randint(1, 3), H * rng.choice((1, 2, 5)), H, rng.choice([g for g in (1, 2, 3, 12) if H % g == 0]),
              rng.choice((1, 2, 5)), rng.randint(1, 50), rng.choice((1, 2, 300, 10000)), ffn_dim=rng.choice((None, 7)),
              dtype=rng.choice(sorted(inference.DTYPES)))
    for q in inference.questions(seed, 20, None, m):
        assert q.answer > 0 or q.topic == "paged"
        assert grade(q, str(float(q.answer))).outcome == "correct", q.prompt


def _config(tmp_path, text: str) -> str:
    path = tmp_path / "model.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


GOOD = "name: tiny\nnum_layers: 4\nd_model: 256\nnum_heads: 4\nnum_kv_heads: 2\nvocab_size: 1000\ncontext: 131072\nffn_dim: 1024\n"


def test_a_config_file_is_read_and_its_sizes_asked(tmp_path, cli):
    m = read_config(_config(tmp_path, GOOD))
    assert (m.name, m.head_dim, m.dtype, m.num_kv_heads) == ("tiny", 64, "bfloat16", 2)
    assert inference.parameters(m) == 1000 * 256 * 2 + 4 * (256 * 256 * 2 + 2 * 256 * 128 + 3 * 256 * 1024 + 2 * 256) + 256
    code, out, err = cli("drill", "counts", "--config", tmp_path / "model.yaml", "--kind", "decode", "--seed", 1,
                         "--count", 3, "--show-answers", "--format", "json")
    assert code == 0, err
    assert {q["model"] for q in json.loads(out)["questions"]} == {"tiny"}


BAD = [
    ("num_heads: -4\n", "num_heads", "must be a whole number from 1 to 4,096"),
    ("num_heads: 4.0\n", "num_heads", "must be a whole number"),
    ("num_heads: '4'\n", "num_heads", "must be a whole number"),
    ("num_heads: true\n", "num_heads", "must be a whole number"),
    ("num_layers: 99999999999999999999\n", "num_layers", "from 1 to 1,000"),
    ("context: 1e99\n", "context", "must be a whole number"),
    ("heads: 3\n", "heads", "unknown field"),
    ("num_kv_heads: 3\n", "num_kv_heads", "must be a multiple of num_kv_heads"),
    ("head_dim: 0\n", "head_dim", "from 1 to"),
    ("dtype: fp64\n", "dtype", "must be one of float32"),
    ("dtype: 2\n", "dtype", "must be one of float32"),
    ("dtype: [1]\n", "dtype", "must be one of float32"),
    ("num_layers: {a: 1}\n", "num_layers", "must be a whole number"),
    ("tied_embeddings: yes\n", "tied_embeddings", "must be true or false"),
    ("kv_lora_rank: 512\n", "kv_lora_rank", "give both or neither"),
    ("sliding_window: 4096\n", "sliding_window", "shorter than the context"),
    ("name: " + "x" * 61 + "\n", "name", "1 to 60 characters"),
]
BASE = "num_layers: 4\nd_model: 256\nnum_heads: 4\nvocab_size: 1000\ncontext: 2048\n"


@pytest.mark.parametrize(("line", "field", "words"), BAD, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD)])
def test_a_bad_field_is_one_line_naming_it_exit_2(tmp_path, cli, line, field, words):
    key = line.split(":")[0]
    text = "".join(row for row in BASE.splitlines(keepends=True) if not row.startswith(key + ":")) + line
    code, out, err = cli("drill", "counts", "--config", _config(tmp_path, text), "--count", 1)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f": {field}: " in lines[0] and words in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize(("text", "words"), [
    ("- 1\n", "is a mapping of fields"),
    ("num_layers: [4\n", "not valid YAML"),
    ("num_layers: 4\nd_model: 256\nnum_heads: 4\nvocab_size: 1000\n", "the field context is missing"),
    ("", "empty"),
    ("num_layers: &a 4\nd_model: *a\n", ""),
])
def test_a_file_that_is_no_configuration_is_one_line(tmp_path, cli, text, words):
    code, out, err = cli("drill", "counts", "--config", _config(tmp_path, text), "--count", 1)
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err


def test_a_missing_file_and_model_with_config_are_usage_errors(tmp_path, cli):
    code, _, err = cli("drill", "counts", "--config", tmp_path / "none.yaml")
    assert code == 2 and "none.yaml" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("drill", "counts", "--config", _config(tmp_path, GOOD), "--model", "Llama-3.1-8B")
    assert code == 2 and "give --model or --config, not both" in err


# --- the command line ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", inference.KINDS)
def test_each_kind_alone(cli, kind):
    code, out, err = cli("drill", "counts", "--kind", kind, "--seed", 4, "--count", 3, "--show-answers", "--format", "json")
    assert code == 0, err
    assert {q["topic"] for q in json.loads(out)["questions"]} == {kind}


@pytest.mark.parametrize(("argv", "words"), [
    (("--kind", "mla", "--model", "Llama-3.1-8B"), "has no MLA latent"),
    (("--kind", "decode", "--model", "DeepSeek-V2"), "caches MLA's latent"),
    (("--kind", "quant", "--model", "deepseek-v2"), "caches MLA's latent"),
    (("--model", "GPT-5"), "unknown model \"GPT-5\""),
])
def test_a_kind_the_model_lacks_is_refused_in_one_line(cli, argv, words):
    code, out, err = cli("drill", "counts", *argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_the_default_draw_has_every_kind(cli):
    code, out, err = cli("drill", "counts", "--seed", 7, "--count", 10, "--show-answers", "--format", "json")
    assert code == 0, err
    assert {q["topic"] for q in json.loads(out)["questions"]} == set(inference.KINDS)


def test_a_piped_run_names_the_mistake_and_the_slip(cli):
    q = inference.questions(11, 1, ("mla",), DSV2)[0]
    typed = f"{float(Fraction(2 * q.answer, 2**30)):.4f} GB"
    code, out, err = cli("drill", "counts", "--kind", "mla", "--model", "DeepSeek-V2", "--seed", 11, "--count", 1,
                         input=typed + "\n")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "That counts the latent twice" in flat and "written with GB" in flat


def test_the_new_options_have_help_in_both_languages(cli):
    code, out, _ = cli("drill", "counts", "--help", env={"COLUMNS": "200"})
    assert code == 0 and "--kind" in out and "--model" in out and "--config" in out and "Llama-3.1-405B" in out
    code, out, _ = cli("drill", "counts", "--help", "--lang", "zh", env={"COLUMNS": "200"})
    assert code == 0 and "按已发布模型的尺寸出题" in out and "只问一类题" in out


def test_a_question_reads_in_chinese():
    with use_language("zh"):
        q = _ask(inference.paged_question, L8, part="fit", block_size=32, tokens=175, memory_gib=60)
        assert "同时能放下多少个这样的请求" in q.prompt and "131,072 字节" in q.prompt
        v = grade(q, str(60 * 2**30 // (175 * 131_072)))
        assert v.diagnosis == "drill.infer.paged.no_rounding" and "整块" in v.diagnosis_text


def test_a_time_is_asked_in_milliseconds_and_a_miss_points_to_its_kind(cli):
    code, out, err = cli("drill", "counts", "--kind", "decode", "--model", "Llama-3.1-8B", "--seed", 5, "--count", 2,
                         input="skip\n13\n")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "Type the milliseconds: 5.76 or 5.76 ms" in flat and "It is 16.08." in flat
    assert "attn-tutor drill counts --kind decode" in flat
