// Runs shared test files on the 32-bit MicroPython (WebAssembly build) under node.
// usage: node tests/run_wasm.mjs LIBDIR TESTDIR VECTORDIR test_a.py [test_b.py ...]
// LIBDIR holds pubmote_wire as .py or .mpy; each test file gets a fresh interpreter.
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";
import fs from "node:fs";
import path from "node:path";

const [libDir, testDir, vectorDir, ...tests] = process.argv.slice(2);

function copyTree(FS, src, dst) {
  try { FS.mkdirTree(dst); } catch (e) { /* exists */ }
  for (const ent of fs.readdirSync(src, { withFileTypes: true })) {
    const s = path.join(src, ent.name);
    if (ent.isDirectory()) {
      if (ent.name !== "__pycache__") copyTree(FS, s, dst + "/" + ent.name);
    } else {
      FS.writeFile(dst + "/" + ent.name, fs.readFileSync(s));
    }
  }
}

let failures = 0;
for (const t of tests) {
  const mod = path.basename(t, ".py");
  const mp = await loadMicroPython({
    heapsize: 256 * 1024,
    stdout: (line) => process.stdout.write(line + "\n"),
    stderr: (line) => process.stderr.write(line + "\n"),
    linebuffer: true,
  });
  copyTree(mp.FS, libDir, "/lib");
  copyTree(mp.FS, testDir, "/tests/shared");
  copyTree(mp.FS, vectorDir, "/tests/vectors");
  try {
    mp.runPython(
      "import sys\nsys.path.insert(0, '/tests/shared')\nimport runner\nimport " + mod +
      "\nif runner.main(" + mod + ".__dict__, '" + mod + "'):\n    raise SystemExit(1)\n");
  } catch (e) {
    failures += 1;
    console.log("ERROR " + mod + ": " + String(e));
  }
}
process.exit(failures ? 1 : 0);
