# Which app a board boots, decided at boot: the pointer file app.ptr (JSON: cur, the app
# folder apps/<cur> in use, "" for the deployed app; prev, the one before; trial, an update
# not yet found healthy; report, news for the bridge) names it. A second boot on trial means
# the new app crashed, hung or lost power before it was healthy: back to prev, by the board
# alone. The pointer changes only by a rename over it, so a power cut leaves the old or the
# new one. Imported at boot only on a board that has been updated (app.ptr exists).
# The files sit at the filesystem's root ("/" is a board's cwd), or under the config's
# "flash_dir" (the simulated board's own folder).
import json
import os

_root = [""]  # the config's flash_dir, ending in "/", or "" for the cwd


def use(cfg):
    """Take the board's files under cfg's flash_dir (default: the cwd)."""
    d = cfg.get("flash_dir", "")
    _root[0] = d if not d or d[-1] == "/" else d + "/"


def path(name):
    """name (app.ptr, app.err, apps) on the board's filesystem."""
    return _root[0] + name


def read():
    """The pointer (a dict), or None when there is none (the deployed app)."""
    try:
        with open(path("app.ptr")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write(ptr):
    """Replace the pointer atomically: written to a temporary file, renamed over it."""
    tmp = path("app.ptr.tmp")
    with open(tmp, "w") as f:
        json.dump(ptr, f)
    os.rename(tmp, path("app.ptr"))


def last_error():
    try:
        with open(path("app.err")) as f:
            return f.read().strip()[-200:]
    except OSError:
        return ""


def note_error(line):
    """Keep an app's last error line (its report, should the board roll back)."""
    try:
        with open(path("app.err"), "w") as f:
            f.write(line[-200:])
    except OSError:
        pass


def choose():
    """The pointer to boot with, rolled back first when the app on trial already had its
    boot; None for the deployed app."""
    ptr = read()
    if ptr is None:
        return None
    trial = ptr.get("trial")
    if trial:
        if trial.get("booted"):
            why = last_error() or "restarted before it was healthy"
            ptr = {"cur": ptr.get("prev", ""), "prev": "",
                   "report": [trial["v"], "rolledback", why]}
        else:
            trial["booted"] = 1
            try:
                os.remove(path("app.err"))
            except OSError:
                pass
        write(ptr)
    return ptr


def apply(ptr, cfg):
    """Put the pointer's app folder first on sys.path and its config keys over cfg."""
    cur = ptr.get("cur") if ptr else None
    if not cur:
        return cfg
    import sys

    folder = path("apps/") + cur
    sys.path.insert(0, folder)
    try:
        with open(folder + "/config.json") as f:
            cfg.update(json.load(f))
    except (OSError, ValueError):
        pass
    return cfg


def reboot():
    """Restart the board: machine.reset() on a board; on the unix port the process ends
    with status 75, and the simulated board's supervisor starts it again."""
    try:
        import machine

        machine.reset()
    except (ImportError, AttributeError):
        pass
    import sys

    sys.exit(75)
