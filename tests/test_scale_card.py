"""The scale card: its values are the registry's (a changed scale changes the card), a change without a reason is
refused, parameters are counted as a built model counts them, and the README carries the cpu card as generated."""

import dataclasses
from pathlib import Path

import pytest
import torch

from tiedlm_lib.model.tied import TiedLM
from tiedlm_lib.paper import scale_card
from tiedlm_lib.runs import registry

ROOT = Path(__file__).resolve().parents[1]


def test_the_card_is_the_registry_and_every_change_says_why():
    rows = {r["quantity"]: r for r in scale_card.scale_card("cpu")}
    assert rows["loop depth K"]["paper A"] == "30" and rows["loop depth K"]["cpu"] == "16"
    assert rows["horizon study steps (section 02)"]["why"].startswith("13x the short run")
    assert all(r["why"] for r in rows.values() if r["paper A"] != r["cpu"])
    assert "favours A1" in rows["learning rate (small / large)"]["why"]  # the scale's own disclosure
    small = TiedLM(registry.experiment("v3", "cpu").model).num_params()  # built for real, not on the meta device
    assert rows["parameters (small / large)"]["cpu"].startswith(f"{small:,} / ")
    assert not any(r["why"] for r in scale_card.scale_card("paper"))


def test_a_changed_scale_changes_the_card_and_an_unexplained_change_is_refused(monkeypatch):
    cpu = registry.SCALES["cpu"]
    monkeypatch.setitem(registry.SCALES, "cpu", dataclasses.replace(cpu, K=8, long_steps=3000))
    rows = {r["quantity"]: r for r in scale_card.scale_card("cpu")}
    long_row = rows["long-run steps (section 02's v7 and long runs)"]
    assert rows["loop depth K"]["cpu"] == "8" and long_row["why"].startswith("3.0x the short run")
    monkeypatch.setitem(registry.SCALES, "cpu", cpu)
    reasons = {k: v for k, v in scale_card.REASONS["cpu"].items() if k != "batch"}
    monkeypatch.setitem(scale_card.REASONS, "cpu", reasons)
    with pytest.raises(ValueError, match=r"changes 'batch' \(32 -> 16\) without a reason"):
        scale_card.scale_card("cpu")
    monkeypatch.setitem(registry.SCALES, "cpu", dataclasses.replace(cpu, batch_size=32))
    assert {r["quantity"]: r for r in scale_card.scale_card("cpu")}["batch"]["why"] == ""  # unchanged: no reason due


def test_other_scales_carry_their_own_reason_and_the_meta_count_is_exact():
    smoke = scale_card.scale_card("smoke")
    assert all(r["why"] == registry.SCALES["smoke"].chosen for r in smoke if r["paper A"] != r["smoke"])
    with torch.device("meta"):
        meta = TiedLM(registry.model_config("v5", "smoke")).num_params()
    assert meta == TiedLM(registry.experiment("v5", "smoke").model).num_params()


def test_the_readme_carries_the_cpu_card_as_generated():
    readme = (ROOT / "README.md").read_text()
    block = readme.split(scale_card.CARD_BEGIN, 1)[1].split(scale_card.CARD_END, 1)[0].strip()
    assert block == scale_card.card_markdown("cpu").strip()
