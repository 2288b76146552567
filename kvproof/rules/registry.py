"""The one ordered table of rules (like ruff's codes.rs): order here is evaluation order.

A rule listed here must be declared in its family module and vice versa (a test checks both
ways). An ID is never reused: a removed rule moves to ``REMOVED`` with the reason.
"""

from __future__ import annotations

from . import (  # noqa: F401 - importing declares the rules
    block_ownership,
    checkpoint_counts,
    prefix_caching,
    profile_capacity,
    profile_fields,
    profile_records,
    record_sets,
    spec_classes,
    startup_concurrency,
    state_storage,
    state_support,
    version_gate,
    view_coverage,
)
from .core import Rule, declared_rules

__all__ = ["RULE_ORDER", "REMOVED", "all_rules", "get_rule"]

RULE_ORDER: tuple[str, ...] = (
    # VG: hybrid evidence only from vLLM 0.33.0
    "VG001",
    # SC: spec classes, kinds, state evidence, the scheduler's copy of each group
    "SC001", "SC007", "SC011", "SC002", "SC008", "SC009", "SC010", "SC013", "SC003", "SC004", "SC012", "SC005", "SC006",
    # CK: prefill checkpoint evidence of Mamba groups (worker records)
    "CK001", "CK002", "CK003",
    # PC: prefix-caching evidence, Mamba modes, resolved block sizes
    "PC001", "PC002", "PC010", "PC003", "PC004", "PC005", "PC006", "PC007",
    # SS: ReplaySSM / RecoverSSM state settings against the support table (kvproof/sim/startup/state_support.py)
    "SS001", "SS002", "SS003", "SS004", "SS005", "SS006", "SS007", "SS008", "SS009", "SS010",
    "SS011", "SS012", "SS013", "SS014", "SS015", "SS016", "SS017", "SS018", "SS019", "SS020",
    # VC: kernel-block views cover the pool
    "VC001", "VC002", "VC003", "VC004", "VC005", "VC006", "VC008", "VC009",
    # BO: one backing storage, placement inside it, page ownership, view extents
    "BO001", "BO002", "BO003", "BO010", "BO004", "BO005", "BO006", "BO007", "BO008", "BO009",
    # VC007 is the removed refusal of seed 001, expected dead given BO007-BO009
    "VC007",
    # SU: start-up concurrency and capacity
    "SU001", "SU002", "SU003", "SU004", "SU005", "SU006", "SU007",
    # PC: phases against the accepted probe (kvproof check --probe)
    "PC008", "PC009",
    # PF: FPM profile fields
    "PF001", "PF002", "PF003", "PF004", "PF005", "PF006", "PF007", "PF008", "PF009", "PF010",
    "PF011", "PF012", "PF013", "PF014", "PF015", "PF016", "PF017", "PF018", "PF019", "PF020",
    "PF021", "PF022", "PF023", "PF024",
    # RS: a record set holds every rank once and agrees with itself; a record's own settings
    "RS001", "RS002", "RS003", "RS004", "RS005", "RS006", "RS007", "RS008", "RS009", "RS010", "RS011", "RS012", "RS013",
    # PA: a profile next to its records holds the values they give (check, kvproof import)
    "PA001", "PA002", "PA003", "PA004", "PA005", "PA006", "PA007", "PA008", "PA009", "PA010", "PA011", "PA012",
    "PA013", "PA014", "PA015", "PA016", "PA017", "PA018", "PA019",
    # CA: a profile alone admits one request and can schedule
    "CA001", "CA002", "CA003",
    # CK004: the checkpoint alignment is the one vLLM's backend gives (seed 001's known limit)
    "CK004",
    # ST: storage policies and the mamba_align / unmodeled layouts (seed 000; ST028: sizing and replay only)
    "ST001", "ST002", "ST003", "ST004", "ST005", "ST006", "ST007", "ST008", "ST009", "ST010",
    "ST011", "ST012", "ST013", "ST014", "ST015", "ST016", "ST017", "ST018", "ST019", "ST020",
    "ST021", "ST022", "ST023", "ST024", "ST025", "ST026", "ST027", "ST028",
)

#: Retired IDs and why; they are never reused.
REMOVED: dict[str, str] = {}


def all_rules() -> list[Rule]:
    """Every rule in evaluation order."""
    declared = declared_rules()
    missing = [rule_id for rule_id in RULE_ORDER if rule_id not in declared]
    unlisted = sorted(set(declared) - set(RULE_ORDER))
    if missing or unlisted:
        raise RuntimeError(f"rule registry out of sync: missing {missing}, unlisted {unlisted}")
    return [declared[rule_id] for rule_id in RULE_ORDER]


def get_rule(rule_id: str) -> Rule:
    for candidate in all_rules():
        if candidate.id == rule_id:
            return candidate
    raise KeyError(rule_id)
