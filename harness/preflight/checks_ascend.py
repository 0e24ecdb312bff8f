"""Verdicts for an Ascend host: the NPU device files and the caller's access to them (the driver's HwHiAiUser group),
npu-smi, the chip against the images this artifact builds, and the HDK driver and firmware against what the
chip's CANN needs. Facts from the `Host`, the stacks from ascend.toml (its schema only); no I/O here.
"""

from __future__ import annotations

import re
from typing import Any

from harness.preflight import FAIL, NOTE, PASS, SKIP, Row, parse, versions
from harness.preflight.host import Host

NO_NPU = ("no Ascend NPU visible (no {dev}/davinci[0-9]*); run on an Ascend host with its driver installed, "
          "or choose cpu")


def chip_of(host: Host, stacks: dict[str, dict[str, Any]]) -> tuple[str | None, str, str]:
    """(ASCEND_CHIP value or None, how it was found, why not) from ASCEND_CHIP, else npu-smi's Name column."""
    forced = host.facts.get("env", {}).get("ASCEND_CHIP")
    if forced:
        return (forced, "ASCEND_CHIP", "") if forced in stacks else (
            None, "ASCEND_CHIP", f"ASCEND_CHIP={forced} is not a chip this image is built for; choose "
                                 f"{' or '.join(sorted(stacks))}")
    info = host.out("npu-smi-info")
    names = parse.npu_smi_info(info.text)["names"] if info.ok else []
    chip, why = parse.ascend_chip(names, stacks)
    how = f"npu-smi info: {len(names)} x {names[0]}" if names and len(set(names)) == 1 else "npu-smi info"
    return chip, how, why


def rows(host: Host, stacks: dict[str, dict[str, Any]]) -> list[Row]:
    f = host.facts
    dev = f.get("dev_dir", "/dev")
    devices = f.get("ascend_devices", {})
    npus = [d for d, s in devices.items() if re.match(r"^/dev/davinci\d+$", d) and s.get("exists")]
    mgmt_missing = [d for d, s in devices.items() if not re.match(r"^/dev/davinci\d+$", d) and not s.get("exists")]
    out = []
    needed = "/dev/davinciN, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc"
    if not npus:
        out.append(Row("NPU device files", f"no {dev}/davinci[0-9]*", needed, FAIL, fix=NO_NPU.format(dev=dev),
                       last=True))
    elif mgmt_missing:
        out.append(Row("NPU device files", f"{len(npus)} NPUs; missing {', '.join(mgmt_missing)}", needed, FAIL,
                       fix=f"{', '.join(mgmt_missing)} missing: install the Ascend driver (HDK) completely and reboot"))
    else:
        out.append(Row("NPU device files", f"{len(npus)} NPUs ({npus[0]}..), davinci_manager, devmm_svm, hisi_hdc",
                       needed, PASS))
    out.append(_access_row(f, npus))
    out.append(_npu_smi_row(host))
    chip, how, why = chip_of(host, stacks)
    built_for = f"a chip the image is built for ({', '.join(sorted(stacks))})"
    if chip:
        s = stacks[chip]
        stack = f"CANN {s['cann']}, torch {s['torch']} + torch_npu {s['torch_npu']}, MindSpore {s['mindspore']}"
        out.append(Row("NPU chip", f"{how} -> ASCEND_CHIP={chip} ({stack})", built_for, PASS))
    else:
        out.append(Row("NPU chip", how, built_for, FAIL if npus else SKIP, fix=why if npus else ""))
    out += _hdk_rows(host, {**stacks[chip], "chip": chip} if chip else None)
    return out


def _access_row(f: dict, npus: list[str]) -> Row:
    user = f.get("user", {})
    check = "device access (HwHiAiUser)"
    needed = "root, or read-write on the device files (the driver's HwHiAiUser group)"
    if not npus:
        return Row(check, "no NPU device files", needed, SKIP)
    if user.get("uid") == 0:
        return Row(check, "root", needed, PASS)
    no_rw = [d for d, s in f.get("ascend_devices", {}).items() if s.get("exists") and not s.get("rw")]
    member = "HwHiAiUser" in user.get("groups", [])
    found = f"uid {user.get('uid')}, {'in' if member else 'not in'} HwHiAiUser"
    if not no_rw:
        return Row(check, found + ": read-write on all", needed, PASS)
    group = f.get("ascend_devices", {})[no_rw[0]].get("group")
    if user.get("hw_gid") is None:
        fix = ("the HwHiAiUser group does not exist on this host (the driver was installed for another user): "
               "reinstall the driver with --install-for-all, or run as root")
    else:
        fix = "add your user to the driver's group: sudo usermod -aG HwHiAiUser $USER, then log in again"
    return Row(check, found + f": no read-write on {no_rw[0]} (group {group})", needed, FAIL,
               fix=f"no read-write access to {', '.join(no_rw)}: {fix}")


def _npu_smi_row(host: Host) -> Row:
    path, info = host.facts.get("npu_smi"), host.out("npu-smi-info")
    check, needed = "npu-smi", "npu-smi (from the Ascend driver) answering `npu-smi info`"
    if info.rc is None or not path:
        return Row(check, "not found", needed, FAIL,
                   fix="npu-smi not found: it comes with the Ascend driver (HDK) in /usr/local/sbin or /usr/local/bin; "
                       "install the driver or put npu-smi on PATH (or NPU_SMI=/path/to/npu-smi)")
    if not info.ok:
        return Row(check, f"{path}: {info.first_line()}", needed, FAIL,
                   fix=f"`npu-smi info` fails ({info.first_line()}): check the driver (dmesg) and the device "
                       "access above")
    p = parse.npu_smi_info(info.text)
    return Row(check, f"{path}, version {p['version'] or '?'}, {len(p['names'])} NPUs", needed, PASS)


def _hdk_rows(host: Host, stack: dict[str, Any] | None) -> list[Row]:
    f = host.facts
    drv_text, fw_text = f.get("driver_version_info"), f.get("firmware_version_info")
    drv = parse.version_info(drv_text or "")
    fw = parse.version_info(fw_text or "")
    drv_ver = (drv.get("package_version") or drv.get("Version")
               or parse.npu_smi_info(host.out("npu-smi-info").text)["version"])
    fw_pkg, fw_ver = fw.get("package_version"), fw.get("Version")
    if stack is None:
        return [Row("HDK driver", drv_ver or "unknown", "the chip's minimum (chip unknown)", SKIP),
                Row("HDK firmware", fw_pkg or fw_ver or "unknown", "the chip's minimum (chip unknown)", SKIP)]
    return [_hdk_row("HDK driver", "driver", drv_ver, stack["min_driver"], stack,
                     "/usr/local/Ascend/driver/version.info"),
            _firmware_row(fw_pkg, fw_ver, drv.get("compatible_version_fw"), stack)]


def _hdk_row(check: str, what: str, found: str | None, minimum: str, stack: dict, path: str) -> Row:
    needed = f">= {minimum} for CANN {stack['cann']}" if minimum else f"no minimum recorded for CANN {stack['cann']}"
    if not found:
        return Row(check, f"unknown (no {path})", needed, FAIL,
                   fix=f"no Ascend {what} version ({path} is missing or unreadable): install the Ascend HDK {what}")
    if not minimum:
        return Row(check, found, needed, NOTE, note=f"ascend.toml records no minimum {what} for this chip: not checked")
    ok = versions.at_least(found, minimum)
    cite = [f"ascend.toml chip.{stack['chip']}"]
    if ok:
        return Row(check, found, needed, PASS, cite=cite)
    return Row(check, found, needed, FAIL, cite=cite,
               fix=f"CANN {stack['cann']} needs HDK {minimum} or newer; this host's {what} is {found}: install the "
                   f"Ascend HDK {minimum}+ driver and firmware for ASCEND_CHIP={stack['chip']}, then reboot"
               if ok is False else f"cannot read the {what} version {found!r}: check {path}")


def _firmware_row(pkg: str | None, ver: str | None, drv_range: str | None, stack: dict) -> Row:
    row = _hdk_row("HDK firmware", "firmware", pkg, stack["min_firmware"], stack,
                   "/usr/local/Ascend/firmware/version.info (package_version)")
    if ver:
        row.found = f"{pkg or '?'} (firmware {ver})"
    rng = parse.version_range(drv_range)
    if row.verdict in (PASS, NOTE) and ver and rng and versions.in_range(ver, *rng) is False:
        row.verdict = FAIL
        row.fix = (f"the installed driver accepts firmware {rng[0]} to {rng[1]} (compatible_version_fw), this host has "
                   f"{ver}: install the firmware of the driver's HDK release, then reboot")
    return row
