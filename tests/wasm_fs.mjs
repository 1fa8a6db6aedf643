// Copy a host directory tree into the WebAssembly MicroPython's in-memory filesystem.
import fs from "node:fs";
import path from "node:path";

export function copyTree(FS, src, dst) {
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
