"""Board profiles load, are complete, and give the firmware a config for every link."""

from __future__ import annotations

import pytest

from pubmote.boards import profiles as boards


def test_the_three_profiles_exist() -> None:
    assert boards.profile_names() == ["esp32", "rp2040", "unix"]


@pytest.mark.parametrize("name", ["esp32", "rp2040", "unix"])
def test_profile_complete(name: str) -> None:
    prof = boards.load_profile(name)
    assert prof["name"] == name
    assert prof["heap_budget_bytes"] <= 24 * 1024
    for link in prof["links"]:
        cfg = boards.board_config(prof, "b1", link)
        assert cfg["name"] == "b1" and cfg["link"] == link


def test_unknown_board_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="esp32, rp2040, unix"):
        boards.load_profile("arduino")


def test_unknown_link() -> None:
    with pytest.raises(ValueError, match="no 'pty' link"):
        boards.board_config(boards.load_profile("esp32"), "b1", "pty")
