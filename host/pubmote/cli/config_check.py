"""Check a bridge configuration (flags and TOML merged) before anything starts, so every
mistake a user can make in it is one line naming the key (and its flag), the value, what
is wrong and what to write instead. Every key is checked by its kind from the config
table (gateway/config.py), whether or not the feature that reads it is on; then the few
rules that span keys (a TLS certificate needs its key, an app module must exist)."""

from __future__ import annotations

import os
from typing import Any

from pubmote.cli.config_kinds import resolve
from pubmote.cli.kinds import KindError
from pubmote.gateway.config import KEYS


class ConfigError(ValueError):
    """A configuration mistake; str() is the one line to show the user."""


def _where(key: str, flags: dict[str, str]) -> str:
    flag = flags.get(key)
    return "TOML key %s%s" % (key, " (%s)" % flag if flag else "")


def check(cfg: dict[str, Any]) -> None:
    """Raise ConfigError for the first mistake in cfg (a load_config result)."""
    from pubmote.cli.bridge_flags import key_flags

    flags = key_flags()
    for key, (default, kind, _what) in KEYS.items():
        value = cfg.get(key)
        if value is None:
            continue
        fn = resolve(kind)
        items = value if isinstance(default, list) else [value]
        if isinstance(default, list) and not isinstance(value, list):
            raise ConfigError("%s: expected text or a list of texts, got %r"
                              % (_where(key, flags), value))
        for item in items:
            if isinstance(default, list) and not isinstance(item, str):
                raise ConfigError("%s: expected text or a list of texts, got %r"
                                  % (_where(key, flags), value))
            try:
                _typed(kind, item)
                fn(item)
            except KindError as e:
                raise ConfigError("%s: %r: %s" % (_where(key, flags), item, e)) from None
    _board_link_tls(cfg)
    _exposed_ingress(cfg)
    _sim_app(cfg, flags)


def _typed(kind: Any, value: Any) -> None:
    """What the kinds accept as text from a flag is a type mistake in the TOML file: a
    number in quotes, a JSON object in a string."""
    name = kind if isinstance(kind, str) else kind[0]
    if name in ("int", "port", "seconds") and isinstance(value, str):
        raise KindError("expected a %s, not text" % (
            "number of seconds" if name == "seconds" else "whole number"))
    if name == "board_config" and not isinstance(value, dict):
        raise KindError("expected a table, e.g. { period_ms = 200 }")


def _board_link_tls(cfg: dict[str, Any]) -> None:
    """Whether the board faces can be as encrypted as the configuration requires."""
    from pubmote.gateway.bridge import board_links_encrypted

    try:
        board_links_encrypted(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _exposed_ingress(cfg: dict[str, Any]) -> None:
    """An SP SUB endpoint or NDN face bound beyond loopback has both its allow-lists."""
    from pubmote.faces.ndn import exposed_problem as ndn_problem
    from pubmote.faces.sp import exposed_problem as sp_problem

    for url in cfg.get("sp_sub") or []:
        why = sp_problem(url, cfg.get("sp_sub_allow_from") or [],
                         cfg.get("sp_sub_allow_topics") or [])
        if why:
            raise ConfigError(why)
    for url in cfg.get("ndn_face") or []:
        why = ndn_problem(url, cfg.get("ndn_allow_from") or [],
                          cfg.get("ndn_allow_prefixes") or [])
        if why:
            raise ConfigError(why)


def _sim_app(cfg: dict[str, Any], flags: dict[str, str]) -> None:
    app_problem(cfg.get("sim_app") or "demo", cfg.get("sim_app_dir"),
                _where("sim_app", flags), "--sim-app-dir")


def app_problem(app: str, app_dir: str | None, app_flag: str, dir_flag: str) -> None:
    """ConfigError unless the simulated boards can import the app module: from app_dir
    or among pubmote's own (a missing one would crash every board at boot)."""
    if app == "demo":
        return
    from pubmote.boards import files

    top = app.split(".")[0]
    where = ([app_dir] if app_dir else []) + files.micropython_path() + \
        [str(files.firmware_dir())]
    for d in where:
        base = os.path.join(os.path.expanduser(d), top)
        if os.path.isfile(base + ".py") or os.path.isfile(base + ".mpy") or \
                os.path.isdir(base):
            return
    raise ConfigError("%s %s: no module %s in %s" % (
        app_flag, app, top, "%s %s" % (dir_flag, app_dir) if app_dir
        else "pubmote's apps (give %s DIR, the folder that holds %s.py)" % (dir_flag, top)))
