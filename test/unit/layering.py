#!/usr/bin/env python3
"""Module boundaries of core/, mechanically: a file in core/<mod>/ may include its own module's
headers and the public header (<dep>.h) of modules below it in DEPENDS, nothing else of core/.
Plugins include only abi/ headers, common/ headers and their own files. common/ (helpers
shared by the core and the plugins, on libc and the ABI's types) includes only its own files and
abi/ headers: the ABI has no code and sits below everything."""
import os
import re
import sys

# Module -> modules it may use (directly). Lower modules never include higher ones.
DEPENDS = {
    "base": [],
    "plugin": ["base"],
    "bootstrap": ["base"],
    "topo": ["base", "plugin"],
    "graph": ["base", "topo"],
    "tune": ["base", "plugin"],
    "prof": ["base", "plugin"],
    "proxy": ["base", "plugin", "prof"],
    "transport": ["base", "plugin", "bootstrap", "topo", "proxy", "prof"],
    "enqueue": ["base", "bootstrap", "topo", "graph", "transport", "tune", "prof"],
    "comm": ["base", "bootstrap", "topo", "graph", "transport", "tune", "enqueue"],
    "api": ["base", "plugin", "enqueue", "comm"],
    "info": ["base", "plugin"],
}

# Modules that may include the kernels' C boundary (kernels/kernels.h).
KERNEL_USERS = {"proxy", "transport", "tune", "enqueue"}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def main():
    root = sys.argv[1]
    core = os.path.join(root, "core")
    abi = set(os.listdir(os.path.join(root, "abi")))
    common = {f for f in os.listdir(os.path.join(root, "common")) if f.endswith(".h")}
    module_files = {m: set(os.listdir(os.path.join(core, m)))
                    for m in os.listdir(core) if os.path.isdir(os.path.join(core, m))}
    bad = 0
    checked = 0
    for mod, files in module_files.items():
        if mod not in DEPENDS:
            print(f"core/{mod}: module missing from layering.py DEPENDS")
            bad += 1
            continue
        allowed = {f"{d}.h" for d in DEPENDS[mod]} | files | abi | common | {"choir_config.h"}
        if mod in KERNEL_USERS:
            allowed |= {"kernels.h"}
        # A module may include its dependencies' own transitive public headers only via them.
        for fname in files:
            if not fname.endswith((".c", ".h")):
                continue
            text = open(os.path.join(core, mod, fname)).read()
            for inc in INCLUDE.findall(text):
                checked += 1
                base = os.path.basename(inc)
                if base not in allowed:
                    print(f"core/{mod}/{fname}: includes \"{inc}\", outside what {mod} may use")
                    bad += 1
    plugins = os.path.join(root, "plugins")
    for dirpath, _, files in os.walk(plugins):
        own = set(files)
        for fname in files:
            if not fname.endswith((".c", ".h", ".cc", ".cpp")):
                continue
            text = open(os.path.join(dirpath, fname)).read()
            for inc in INCLUDE.findall(text):
                checked += 1
                if os.path.basename(inc) not in abi | common | own:
                    print(f"{os.path.relpath(os.path.join(dirpath, fname), root)}: includes "
                          f"\"{inc}\"; plugins include only abi/, common/ and their own files")
                    bad += 1
    for fname in sorted(os.listdir(os.path.join(root, "common"))):
        if not fname.endswith((".c", ".h")):
            continue
        text = open(os.path.join(root, "common", fname)).read()
        for inc in INCLUDE.findall(text):
            checked += 1
            if os.path.basename(inc) not in common | abi:
                print(f"common/{fname}: includes \"{inc}\"; common/ uses libc and abi/ only")
                bad += 1
    print(f"layering: {checked} includes checked, {bad} violation(s)")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
