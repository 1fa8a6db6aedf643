// Runs shared test files on the 32-bit MicroPython (WebAssembly build) under node.
// usage: node tests/run_wasm.mjs LIBDIR TESTDIR VECTORDIR test_a.py [test_b.py ...]
// LIBDIR holds pubmote_wire as .py or .mpy; each test file gets a fresh interpreter.
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";
import fs from "node:fs";
import { copyTree } from "./wasm_fs.mjs";
import path from "node:path";

const [libDir, testDir, vectorDir, ...tests] = process.argv.slice(2);


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
