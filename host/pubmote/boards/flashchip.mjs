// The emulated Pico's QSPI flash chip as the firmware writes it: rp2040js reads flash through
// XIP but does not emulate the chip behind the boot ROM's flash functions, so an erase or a
// program did nothing (littlefs's mkfs failed with ENOSPC, every write was lost). Here the
// six ROM functions the pico-sdk's flash_range_erase/flash_range_program call are found the
// way rom_func_lookup finds them (the ROM's function table), their first instruction is
// replaced by a BKPT, and the breakpoint does the chip's work on rp2040.flash and returns to
// the caller as the ROM function would:
//   RE flash_range_erase(addr, count, block_size, block_cmd): 4096-byte sectors to 0xff
//      (64 KiB blocks where block_size/block_cmd ask for them and the range covers one);
//   RP flash_range_program(addr, data, count): data ANDed into the flash, as NOR programming
//      can only clear bits;
//   IF connect_internal_flash, EX flash_exit_xip, FC flush_cache, CX enter_cmd_xip: nothing
//      to do (pads, SSI modes and the XIP cache, which rp2040js does not model).
// Each operation takes the emulated time a W25Q16JV (the Pico's chip) typically takes, and,
// given an output file, is written through to it before the ROM call returns: killing the
// runner at any moment (a power cut) leaves the file holding every operation the firmware
// saw complete, which a later run boots from (pico.mjs --flash-in).
import fs from "node:fs";

const SECTOR = 4096;
const PAGE = 256;
// W25Q16JV datasheet, typical: sector erase 45 ms, 64 KiB block erase 150 ms, page program
// 0.4 ms
const SECTOR_ERASE_NS = 45e6;
const BLOCK_ERASE_NS = 150e6;
const PAGE_PROGRAM_NS = 0.4e6;
const BKPT = 0xbe00;

function code(name) {
  return name.charCodeAt(0) | (name.charCodeAt(1) << 8);
}

// rom_func_lookup: a halfword at 0x14 points at a table of (code, address) halfword pairs,
// ended by a zero code
function romFunctions(rom) {
  const out = new Map();
  let p = rom.getUint16(0x14, true);
  for (;;) {
    const c = rom.getUint16(p, true);
    if (c === 0) break;
    out.set(c, rom.getUint16(p + 2, true));
    p += 4;
  }
  return out;
}

// Installs the chip on rp2040 (after its boot ROM is loaded and its flash filled). opts:
// flashBytes (the chip's size: addresses wrap at it, as on the chip), outPath (write-through
// file, or undefined), onBusy (called with the nanoseconds each operation keeps the core
// waiting, before the clock moves on, or undefined). Returns counters: erases (sectors), programs (pages), bytesWritten
// (to the file).
export function installFlashChip(rp2040, opts) {
  const { core, clock, flash } = rp2040;
  const size = opts.flashBytes;
  const stats = { erases: 0, programs: 0, bytesWritten: 0 };
  let fd = null;
  if (opts.outPath) {
    fd = fs.openSync(opts.outPath, fs.existsSync(opts.outPath) ? "r+" : "w");
    fs.ftruncateSync(fd, size);
    fs.writeSync(fd, flash, 0, size, 0);
  }
  const persist = (off, len) => {
    if (fd === null) return;
    fs.writeSync(fd, flash, off, len, off);
    stats.bytesWritten += len;
  };

  const erase = () => {
    const [addr, count, blockSize, blockCmd] = core.registers;
    let a = addr - (addr % SECTOR);
    const goal = addr + count;
    let ns = 0;
    while (a < goal) {
      const block = blockCmd && blockSize > SECTOR && a % blockSize === 0 && goal - a >= blockSize;
      const len = block ? blockSize : SECTOR;
      const off = a % size;
      flash.fill(0xff, off, off + len);
      persist(off, len);
      stats.erases += len / SECTOR;
      ns += block ? BLOCK_ERASE_NS : SECTOR_ERASE_NS;
      a += len;
    }
    return ns;
  };
  const program = () => {
    const [addr, data, count] = core.registers;
    // page by page, as the ROM sends them (the pico-sdk passes whole, aligned pages)
    for (let done = 0; done < count; done += PAGE) {
      const len = Math.min(count - done, PAGE);
      const off = (addr + done) % size;
      for (let i = 0; i < len; i++) flash[off + i] &= rp2040.readUint8(data + done + i);
      persist(off, len);
      stats.programs++;
    }
    return Math.ceil(count / PAGE) * PAGE_PROGRAM_NS;
  };
  const nothing = () => 0;

  const rom = new DataView(rp2040.bootrom.buffer, rp2040.bootrom.byteOffset);
  const table = romFunctions(rom);
  const handlers = new Map();
  for (const [name, fn] of [["IF", nothing], ["EX", nothing], ["RE", erase], ["RP", program],
    ["FC", nothing], ["CX", nothing]]) {
    const at = table.get(code(name));
    if (at === undefined) throw new Error("the boot ROM has no " + name + " function");
    const entry = at & ~1;
    handlers.set(entry, fn);
    rom.setUint16(entry, BKPT, true);
  }
  const otherBreak = rp2040.onBreak;
  rp2040.onBreak = (imm) => {
    // the BKPT has been fetched: PC is 2 past it
    const fn = handlers.get((core.PC - 2) >>> 0);
    if (fn === undefined) return otherBreak(imm);
    const ns = fn();
    core.PC = core.LR & ~1; // bx lr
    if (ns > 0) {
      if (opts.onBusy) opts.onBusy(ns);
      clock.tick(ns); // the core waits on the chip; interrupts stay pending
    }
  };
  stats.close = () => {
    if (fd !== null) fs.closeSync(fd);
    fd = null;
  };
  return stats;
}
