// Run one MicroPython script on the 32-bit WebAssembly MicroPython under node, with a
// library directory copied into its /lib. usage: node bench/wasm_run.mjs LIBDIR SCRIPT [ARG]
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";
import fs from "node:fs";
import { copyTree } from "../tests/wasm_fs.mjs";
import path from "node:path";

// With --async FN, the script is imported and `await FN()` runs it: the WebAssembly
// build's asyncio lives on node's event loop and has no asyncio.run.
let argv0 = process.argv.slice(2);
let asyncFn = null;
if (argv0[0] === "--async") {
  asyncFn = argv0[1];
  argv0 = argv0.slice(2);
}
const [libDir, script, ...args] = argv0;


const mp = await loadMicroPython({
  heapsize: 512 * 1024,
  stdout: (line) => process.stdout.write(line + "\n"),
  stderr: (line) => process.stderr.write(line + "\n"),
  linebuffer: true,
});
copyTree(mp.FS, libDir, "/lib");
mp.FS.writeFile("/main.py", fs.readFileSync(script));
const argv = JSON.stringify(["main.py", ...args]);
try {
  if (asyncFn) {
    mp.FS.writeFile("/bench_script.py", fs.readFileSync(script));
    await mp.runPythonAsync("import sys\nsys.argv[:] = " + argv +
      "\nsys.path.insert(0, '/')\nimport bench_script\nawait bench_script." + asyncFn + "()\n");
  } else {
    mp.runPython("import sys\nsys.argv[:] = " + argv + "\nexec(open('/main.py').read(), {'__name__': '__main__'})\n");
  }
} catch (e) {
  console.log("ERROR " + String(e));
  process.exit(1);
}
