"""The steady-state chunk loop of a wgmma forward kernel's SASS, counted by opcode: the shortest loop (a backward
branch to a label above it) that issues both products (an HGMMA with tnspB, the P V one) and more than 8 MUFUs.
Used to set our kernels' SASS beside FlashAttention-4's (its cubins kept by probe.py under $OUT/fa4dump).
Usage: python3 sass_loops.py KERNEL.sass ... (nvdisasm -c of a cubin), one line a file, the loop's listing beside
each file as <file>.loop."""
import collections
import re
import sys


def parse(path):
    """(instructions, {label: index of the instruction after it}) of an nvdisasm listing."""
    ins, labels = [], {}
    for line in open(path):
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append(m.group(2).strip())
    return ins, labels


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def steady_loop(path):
    ins, labels = parse(path)
    loops = []
    for i, text in enumerate(ins):
        m = re.search(r"BRA\s+(?:`\()?(\.L_x_\d+)", text)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            body = ins[labels[m.group(1)]:i + 1]
            if any("tnspB" in x for x in body) and sum("MUFU" in x for x in body) > 8:
                loops.append(body)
    return min(loops, key=len)


def main():
    for path in sys.argv[1:]:
        body = steady_loop(path)
        counts = collections.Counter(opcode(x) for x in body)
        uniform = sum(v for k, v in counts.items() if k.startswith("U") or k == "R2UR")
        print(f"{path}: {len(body)} instructions, {uniform} uniform: "
              + " ".join(f"{k}:{v}" for k, v in counts.most_common()))
        with open(path + ".loop", "w") as f:
            f.writelines(f"{k:4d} {x}\n" for k, x in enumerate(body))


if __name__ == "__main__":
    main()
