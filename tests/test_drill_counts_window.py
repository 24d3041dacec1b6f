"""``drill counts`` for a model with a sliding window (rope trial, F3/F3b): every question of one quiz counts
the same cache, ``min(L, W)`` tokens a sequence (the rolling buffer of Jiang et al. 2023, "Mistral 7B",
section 2).  The numbers are written out by hand here, from the finding."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from tutor.base.messages import use_language
from tutor.drills import inference
from tutor.drills.inference import PRESETS, Model, read_config
from tutor.drills.record import grade

MISTRAL = PRESETS["mistral-7b-v0.1"]
#: Mistral 7B's weight matrices (Jiang et al. 2023, Table 1): per layer W_Q 4096·4096, W_K and W_V 4096·1024,
#: W_O 4096·4096, the SwiGLU 3·4096·14336; the output head 32000·4096.
M7_MATRICES = 32 * (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 3 * 4096 * 14336) + 32000 * 4096
M7_KV_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 heads of 128, bfloat16: 131,072 bytes a token


def _ask(maker, m: Model, **sizes):
    return maker(m, random.Random(0), "t", **sizes)


def test_the_finding_decode_reads_the_rolling_buffer_not_8192_tokens():
    """The finding's Q6 (seed 2): B = 16 at L = 8192 reads 14,220,787,712 + 8,589,934,592 bytes, not 31,400,656,896."""
    assert M7_MATRICES == 7_110_393_856
    q = _ask(inference.decode_question, MISTRAL, part="bytes", B=16, L=8192)
    assert q.answer == 2 * M7_MATRICES + 16 * 4096 * M7_KV_TOKEN == 22_810_722_304
    assert grade(q, "31,400,656,896").diagnosis == "drill.infer.window.uncapped"
    window = _ask(inference.window_question, MISTRAL, B=16, L=8192)
    assert window.answer == 16 * 4096 * M7_KV_TOKEN == q.answer - 2 * M7_MATRICES  # one cache in one quiz


def test_decode_flops_time_and_intensity_attend_to_w_keys():
    flops = 2 * M7_MATRICES + 4 * 32 * 32 * 128 * 4096  # Q·Kᵀ and weights·V over the 4096 keys kept
    q = _ask(inference.decode_question, MISTRAL, part="flops", B=4, L=8192)
    assert q.answer == flops == 15_294_529_536 + 4 * 32 * 32 * 128 * 2048
    assert "min(L, W)" in q.explain[0]
    read = 2 * M7_MATRICES + 4 * 4096 * M7_KV_TOKEN
    q = _ask(inference.decode_question, MISTRAL, part="intensity", B=4, L=8192)
    assert q.answer == Fraction(4 * flops, read)
    q = _ask(inference.decode_question, MISTRAL, part="time", B=4, L=8192, bandwidth=1000)
    assert q.answer == Fraction(read * 1000, 1000 * 10**9)
    # below the window nothing changes: L tokens kept
    q = _ask(inference.decode_question, MISTRAL, part="bytes", B=4, L=2048)
    assert q.answer == 2 * M7_MATRICES + 4 * 2048 * M7_KV_TOKEN
    assert "drill.infer.window.uncapped" not in {v.key for v in q.variants}


def test_prefill_writes_the_last_w_tokens_and_says_the_window_is_a_mask():
    P, B = 8192, 4
    flops = 2 * M7_MATRICES * P + 4 * 32 * 32 * 128 * P * P  # the plain forward's full P×P scores
    q = _ask(inference.prefill_question, MISTRAL, part="flops", B=B, P=P)
    assert q.answer == flops and "part of the mask" in q.prompt
    q = _ask(inference.prefill_question, MISTRAL, part="intensity", B=B, P=P)
    assert q.answer == Fraction(B * flops, 2 * M7_MATRICES + B * 4096 * M7_KV_TOKEN)


def test_the_quantized_cache_and_the_paged_requests_hold_at_most_w_tokens():
    q = _ask(inference.quant_question, MISTRAL, B=2, L=8192, bits=8, group=64)
    values = 2 * 32 * 2 * 4096 * 8 * 128
    assert q.answer == values + values // 64 * 2
    held = {q.config["tokens"] for s in range(60) for q in inference.questions(s, 2, ("paged",), MISTRAL)}
    assert max(held) <= 4096


def test_a_layers_questions_of_a_windowed_model_ask_only_lengths_the_window_leaves_whole():
    lengths = {q.config.get("L") or q.config.get("L_q") for s in range(40)
               for q in inference.questions(s, 4, ("flops", "weights_memory", "kv_cache"), MISTRAL)}
    assert lengths and max(lengths) <= 4096


@pytest.mark.parametrize("seed", range(8))
def test_every_cache_in_a_mistral_quiz_is_the_rolling_buffers(seed):
    """Whatever a quiz draws, the bytes of one sequence's cache it implies are 2·32·min(L, 4096)·8·128·2."""
    for q in inference.questions(seed, 12, None, MISTRAL):
        c = q.config
        if q.topic == "decode" and c["part"] == "bytes":
            assert q.answer - 2 * M7_MATRICES == c["B"] * min(c["L"], 4096) * M7_KV_TOKEN
        elif q.topic == "window":
            assert q.answer == c["B"] * min(c["L"], 4096) * M7_KV_TOKEN
        elif q.topic == "kv_cache":
            assert c["L"] <= 4096 and q.answer == c["B"] * c["L"] * M7_KV_TOKEN


def test_the_finding_config_with_a_window_of_16(tmp_path):
    """F3b: cfg2.yaml decodes at L = 4096 with 16 keys kept: 2·88,320 + 4·2·4·16·16 = 184,832, not 2,273,792."""
    path = tmp_path / "cfg2.yaml"
    path.write_text("num_layers: 2\nd_model: 64\nnum_heads: 4\nvocab_size: 100\ncontext: 4096\nffn_dim: 128\n"
                    "sliding_window: 16\n", encoding="utf-8")
    m = read_config(str(path))
    assert inference.matrix_parameters(m) == 2 * (4 * 64 * 64 + 3 * 64 * 128) + 100 * 64 == 88_320
    q = _ask(inference.decode_question, m, part="flops", B=1, L=4096)
    assert q.answer == 2 * 88_320 + 4 * 2 * 4 * 16 * 16 == 184_832
    q = _ask(inference.decode_question, m, part="bytes", B=3, L=4096)
    assert q.answer == 2 * 88_320 + 3 * 16 * (2 * 2 * 4 * 16) * 2


def test_the_window_is_said_in_both_languages():
    for lang, words in (("en", "rolling buffer"), ("zh", "滚动缓冲区")):
        with use_language(lang):
            q = _ask(inference.decode_question, MISTRAL, part="bytes", B=1, L=8192)
        assert words in q.prompt and "4096" in q.prompt
        assert "。 " not in q.prompt  # sentences joined as the language joins them
    with use_language("zh"):
        q = _ask(inference.prefill_question, MISTRAL, part="flops", B=1, P=8192)
    assert "。 " not in q.prompt and "掩码的一部分" in q.prompt


def test_the_bandwidth_is_not_said_to_be_a_gigabyte_a_second():
    """F4: "1,000 GB/s (10^9 bytes a second)" read as the bandwidth; the unit is what the parenthesis defines."""
    for lang in ("en", "zh"):
        with use_language(lang):
            q = _ask(inference.decode_question, PRESETS["llama-3.1-8b"], part="time", B=1, L=2048, bandwidth=1000)
        assert "1 GB = 10^9" in q.prompt and "10^9 bytes a second" not in q.prompt and "每秒 10^9" not in q.prompt


# --- F16: sizes of 1,000 units and more, legible ----------------------------------------------------------------


def test_the_finding_1004_gib_is_written_as_such_and_typing_it_is_right():
    """Llama-3.1-405B decoding B = 4 at L = 131072 reads 2·403,747,897,344 + 4·131072·(2·126·8·128·2) bytes
    = 1,078,078,734,336 = 1004.04 GiB: printed "(1e+03 GiB)" before."""
    q = _ask(inference.decode_question, PRESETS["llama-3.1-405b"], part="bytes", B=4, L=131072)
    assert q.answer == 2 * 403_747_897_344 + 4 * 131072 * 2 * 126 * 8 * 128 * 2 == 1_078_078_734_336
    assert q.answer_text == "1,078,078,734,336 (1,004 GiB)"
    assert grade(q, "1004 GiB").outcome == "correct"


@pytest.mark.parametrize(("n", "text"), [
    (1000 * 2**30 + 2**29, "1,001 GiB"),  # 1000.5: half up
    (1000 * 2**30, "1,000 GiB"), (1023 * 2**20, "1,023 MiB"), (150 * 2**40, "150 TiB"), (5000 * 2**40, "5,000 TiB"),
    (99 * 2**30 + 2**29, "99.5 GiB"), (29 * 2**30, "29 GiB"), (3 * 2**19, "1.5 MiB"), (999, "999 B"),
])
def test_no_size_is_written_in_scientific_notation(n, text):
    from tutor.drills.counts import human_bytes

    assert human_bytes(n) == text and "e+" not in text


def test_no_count_drill_answer_is_written_in_scientific_notation():
    for s in range(60):
        for q in inference.questions(s, 12, None, PRESETS["llama-3.1-405b"]) + inference.questions(s, 12):
            assert "e+" not in q.answer_text and all("e+" not in line for line in q.explain), q.answer_text


# --- F6: an empty configuration is told what a configuration needs ----------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
@pytest.mark.parametrize(("lang", "needs", "exercise"), [
    ("en", "a model configuration needs at least num_layers", "an exercise"), ("zh", "模型配置至少需要 num_layers", "练习")])
def test_an_empty_configuration_names_a_configurations_fields(tmp_path, text, lang, needs, exercise):
    from tutor.drills.inference import ModelError

    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    with use_language(lang), pytest.raises(ModelError) as err:
        read_config(str(path))
    said = str(err.value)
    assert needs in said and exercise not in said and said.startswith(str(path) + ":1:1: ")


def test_a_merge_key_in_a_configuration_gets_a_configurations_hint(tmp_path):
    from tutor.drills.inference import ModelError

    path = tmp_path / "cfg.yaml"
    path.write_text("a: &a {num_layers: 2}\n<<: *a\n", encoding="utf-8")
    with pytest.raises(ModelError) as err:
        read_config(str(path))
    assert "write each field out" in str(err.value) and "w_k" not in str(err.value)
