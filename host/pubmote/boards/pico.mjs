// An emulated Raspberry Pi Pico for pubmote (rp2040js, MIT, used through its API): boots a
// MicroPython firmware.bin, with an optional littlefs image placed in flash, on a flash chip
// the firmware can erase and program (flashchip.mjs), and joins
//   UART0  <-> this process's stdin/stdout (raw bytes; the bridge's pty "cable" is attached
//             here), fed to the board no faster than a real line at --baud, and never faster
//             than the firmware drains its 32-byte RX FIFO;
//   USB CDC -> --usb-log FILE (or stderr): the REPL's output, print() and tracebacks.
// The emulated clock is held back to the wall clock (an idle core would otherwise run
// asyncio's timers ahead of real time); --fast lifts that for batch runs such as the tests.
//
// The flash starts erased, then holds --flash-in (a whole-chip image, as --flash-out writes),
// then --firmware at 0, then --fs at --fs-offset; --flash-out FILE keeps the whole chip in
// FILE, every erase and program written through before the firmware sees it done, so a
// board killed at any moment (a power cut) boots again from FILE with --flash-in FILE.
//
// The runner exits with status 75 when the firmware resets the chip through the watchdog
// (machine.reset(), and machine.deepsleep()'s wake-up), for its supervisor to start it
// again from --flash-out.
//
// usage: node pico.mjs --bootrom R.bin [--firmware F.bin] [--fs IMG --fs-offset N]
//          [--flash-in FILE] [--flash-out FILE] [--flash-bytes 2097152] [--baud 115200]
//          [--usb-log FILE] [--exit-on TEXT] [--timeout-s S] [--fast] [--overrun]
//          [--steady-clock]
//          [--repl LINE]   (typed at the REPL over USB CDC once its first prompt appears)
import fs from "node:fs";
import { Simulator, USBCDC } from "rp2040js";
import { installFlashChip } from "./flashchip.mjs";

function parseArgs(argv) {
  const opts = { baud: 115200, fsOffset: 0, timeoutS: 0, fast: false, flashBytes: 2 << 20 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(a + " needs a value");
      return argv[++i];
    };
    if (a === "--firmware") opts.firmware = next();
    else if (a === "--bootrom") opts.bootrom = next();
    else if (a === "--fs") opts.fs = next();
    else if (a === "--fs-offset") opts.fsOffset = Number(next());
    else if (a === "--flash-in") opts.flashIn = next();
    else if (a === "--flash-out") opts.flashOut = next();
    else if (a === "--flash-bytes") opts.flashBytes = Number(next());
    else if (a === "--baud") opts.baud = Number(next());
    else if (a === "--usb-log") opts.usbLog = next();
    else if (a === "--exit-on") opts.exitOn = next();
    else if (a === "--timeout-s") opts.timeoutS = Number(next());
    else if (a === "--fast") opts.fast = true;
    else if (a === "--overrun") opts.overrun = true;
    else if (a === "--steady-clock") opts.steadyClock = true;
    else if (a === "--repl") opts.repl = next();
    else throw new Error("unknown argument " + a);
  }
  if (!opts.bootrom) throw new Error("--bootrom is required");
  if (!opts.firmware && !opts.flashIn) throw new Error("--firmware or --flash-in is required");
  const fb = opts.flashBytes;
  if (!(fb >= 65536 && fb <= 16 << 20 && (fb & (fb - 1)) === 0)) {
    throw new Error("--flash-bytes must be a power of two from 65536 to 16777216");
  }
  return opts;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  process.stderr.write("pico.mjs: " + e.message + "\n");
  process.exit(2);
}

const sim = new Simulator();
const { rp2040, clock } = sim;
// stdout is the UART line: rp2040js's console logging must never reach it. Its errors
// (unimplemented peripherals the firmware touches at boot, harmless) go to stderr when
// PUBMOTE_EMU_DEBUG is set, and nowhere otherwise.
const debug = !!process.env.PUBMOTE_EMU_DEBUG;
const toStderr = (c, m) => debug && process.stderr.write("[" + c + "] " + m + "\n");
rp2040.logger = { debug: () => {}, info: () => {}, warn: toStderr, error: toStderr };
const rom = fs.readFileSync(opts.bootrom);
rp2040.loadBootrom(new Uint32Array(rom.buffer, rom.byteOffset, rom.length >> 2));
// The ring oscillator is unimplemented in rp2040js (reads 0), so MicroPython's os.urandom,
// which shifts in ROSC RANDOMBIT, returns b"****" forever: every nonce the same, and the
// bridge takes every message after the first for a duplicate. A real ROSC is noise.
const rosc = rp2040.peripherals[0x40060];
const roscRead = rosc.readUint32.bind(rosc);
rosc.readUint32 = (offset) => (offset === 0x1c ? (Math.random() < 0.5 ? 1 : 0) : roscRead(offset));
// The temperature sensor (ADC input 4) reads 0 in rp2040js, which the RP2040's formula
// turns into 437 °C. Feed it what a real chip at room temperature gives (datasheet 4.9.5:
// 0.706 V at 27 °C, -1.721 mV per °C, 3.3 V reference, 12 bits): about 21.5 °C, drifting
// by a few tenths over minutes, with a count of noise as a real ADC has.
const adcValues = rp2040.adc.channelValues;
const t0 = Date.now();
Object.defineProperty(adcValues, 4, {
  get() {
    const celsius = 21.5 + 0.4 * Math.sin((Date.now() - t0) / 90000);
    const volts = 0.706 - (celsius - 27) * 0.001721;
    return Math.round((volts / 3.3) * 4095 + (Math.random() - 0.5) * 2);
  },
  set() {},
});
// Core 1 is not emulated (rp2040js runs core 0 only), and its inter-core FIFO reads as
// always full of 0xffffffff, so MicroPython's _thread (which launches core 1) spun forever
// in the pico-sdk's launch handshake: a board that starts a thread (the update's trial
// watchdog) hung. Core 1's boot ROM side of the handshake is answered here: a 0 once it
// leaves reset, then every word sent echoed back, so the launch returns; what it launches
// never runs (a thread on an emulated Pico does not run, its caller goes on).
const SIO_FIFO_ST = 0x50;
const SIO_FIFO_WR = 0x54;
const SIO_FIFO_RD = 0x58;
const PSM_FRCE_OFF = 0x04;
const PROC1 = 1 << 16;
const fromCore1 = [];
const sioRead = rp2040.sio.readUint32.bind(rp2040.sio);
const sioWrite = rp2040.sio.writeUint32.bind(rp2040.sio);
rp2040.sio.readUint32 = (offset) => {
  if (offset === SIO_FIFO_ST) return (fromCore1.length ? 1 : 0) | 2; // VLD, RDY
  if (offset === SIO_FIFO_RD) return fromCore1.length ? fromCore1.shift() : 0;
  return sioRead(offset);
};
rp2040.sio.writeUint32 = (offset, value) => {
  if (offset === SIO_FIFO_WR) {
    if (fromCore1.length < 8) fromCore1.push(value >>> 0);
  } else if (offset !== SIO_FIFO_ST) sioWrite(offset, value);
};
const psm = rp2040.peripherals[0x40010];
const psmWrite = psm.writeUint32.bind(psm);
psm.writeUint32 = (offset, value) => {
  const wasOff = offset === PSM_FRCE_OFF && psm.frceOff & PROC1;
  psmWrite(offset, value);
  if (wasOff && !(psm.frceOff & PROC1)) {
    fromCore1.length = 0;
    fromCore1.push(0);
  }
};
// machine.reset() (the watchdog's trigger, or its timer running out): rp2040js has no chip
// reset, so the runner ends with status 75 (what the unix port's board exits with to be
// rebooted: sim.REBOOT_STATUS), every flash write already in --flash-out; its supervisor
// starts it again from that image, on the same UART line.
const REBOOT_STATUS = 75;
rp2040.peripherals[0x40058].onWatchdogTrigger = () => finish(REBOOT_STATUS);
rp2040.flash.fill(0xff); // erased flash, as a new board's: no filesystem until one is given
function placeImage(path, offset, what, after) {
  let img;
  try {
    img = fs.readFileSync(path);
  } catch (e) {
    process.stderr.write("pico.mjs: " + what + ": " + e.message + "\n");
    process.exit(2);
  }
  if (offset < after || offset + img.length > opts.flashBytes) {
    process.stderr.write("pico.mjs: " + what + " overlaps the firmware or the flash's end (" +
      opts.flashBytes + " bytes)\n");
    process.exit(2);
  }
  rp2040.flash.set(img, offset);
  return img.length;
}
if (opts.flashIn) placeImage(opts.flashIn, 0, "the --flash-in image", 0);
const firmwareEnd = opts.firmware ? placeImage(opts.firmware, 0, "the firmware", 0) : 0;
if (opts.fs) placeImage(opts.fs, opts.fsOffset, "the filesystem image", firmwareEnd);
let flashChip;
try {
  flashChip = installFlashChip(rp2040, { flashBytes: opts.flashBytes, outPath: opts.flashOut,
    onBusy: (ns) => lineDuringFlash(ns) });
} catch (e) {
  process.stderr.write("pico.mjs: " + e.message + "\n");
  process.exit(2);
}
rp2040.core.PC = 0x10000000;

// ---- USB CDC: the REPL's output ----------------------------------------------------------
const usbFd = opts.usbLog ? fs.openSync(opts.usbLog, "a") : 2;
let usbTail = "";
const cdc = new USBCDC(rp2040.usbCtrl);
// rp2040js answers the firmware's every OUT-endpoint read at once, with nothing when there
// is nothing to send: TinyUSB re-arms, gets another empty packet, and the core spins in the
// USB interrupt instead of sleeping (half the emulator's time, idle). A real host sends an
// OUT packet only when it has data: hold the read until there is some.
let heldRead = null;
const answerRead = rp2040.usbCtrl.onEndpointRead;
rp2040.usbCtrl.onEndpointRead = (endpoint, size) => {
  if (endpoint === cdc.outEndpoint && cdc.txFIFO.empty) heldRead = [endpoint, size];
  else answerRead(endpoint, size);
};
function sendUsb(bytes) {
  for (const b of bytes) cdc.sendSerialByte(b);
  if (heldRead) {
    const [endpoint, size] = heldRead;
    heldRead = null;
    answerRead(endpoint, size);
  }
}
cdc.onDeviceConnected = () => {
  // MicroPython drops what it prints before the host opens the port (the boot banner and
  // the first prompt, on a fast boot): with --repl, ask for a fresh prompt
  if (opts.repl !== undefined) sendUsb([13]);
};
cdc.onSerialData = (buf) => {
  fs.writeSync(usbFd, buf);
  if (opts.repl !== undefined || opts.exitOn) {
    // keep just enough text to find the prompt or marker across chunk boundaries
    usbTail = (usbTail + Buffer.from(buf).toString("latin1")).slice(-4096);
  }
  if (opts.repl !== undefined && usbTail.includes(">>> ")) {
    const line = opts.repl + "\r";
    opts.repl = undefined;
    usbTail = "";
    sendUsb(Buffer.from(line));
  }
  if (opts.exitOn) {
    if (usbTail.includes(opts.exitOn)) finish(0);
  }
};

// ---- UART0: stdin -> RX at line rate, TX -> stdout -----------------------------------------
const uart = rp2040.uart[0];
const byteNanos = Math.round((10 * 1e9) / opts.baud); // start + 8 data + stop bits
const rxQueue = [];
let rxHead = 0;
const RX_PAUSE = 8192; // stop reading stdin beyond this: the pty (and the cable) buffer it
const RX_RESUME = 1024;
let stdinPaused = false;
const rxAlarm = clock.createAlarm(feedRx);
let rxScheduled = false;

function feedRx() {
  rxScheduled = false;
  if (rxHead < rxQueue.length && !uart.rxFIFO.full) {
    uart.feedByte(rxQueue[rxHead++]);
    bytesFed++;
    if (rxHead > 4096) {
      rxQueue.splice(0, rxHead);
      rxHead = 0;
    }
  }
  if (stdinPaused && rxQueue.length - rxHead < RX_RESUME) {
    stdinPaused = false;
    process.stdin.resume();
  }
  // one byte per character time; a full FIFO is retried a character later, as a sender
  // with flow control would wait
  if (rxHead < rxQueue.length) schedule();
}

function schedule() {
  if (!rxScheduled) {
    rxScheduled = true;
    rxAlarm.schedule(byteNanos);
  }
}

// While the flash chip is busy (MicroPython erases and programs with interrupts off, for
// 45 ms a sector) the line waits by default, as with hardware flow control. --overrun: the
// line goes on, as on a real UART without flow control: what arrives beyond the RX FIFO's
// 32 bytes is lost (counted in --debug's flash line).
let rxLost = 0;
function lineDuringFlash(ns) {
  if (!opts.overrun) return;
  for (let n = Math.floor(ns / byteNanos); n > 0 && rxHead < rxQueue.length; n--) {
    if (uart.rxFIFO.full) rxLost++;
    else {
      uart.feedByte(rxQueue[rxHead]);
      bytesFed++;
    }
    rxHead++;
  }
}

let bytesIn = 0;
let bytesFed = 0;
let bytesOut = 0;
process.stdin.on("data", (chunk) => {
  bytesIn += chunk.length;
  for (const b of chunk) rxQueue.push(b);
  if (rxQueue.length - rxHead > RX_PAUSE && !stdinPaused) {
    stdinPaused = true;
    process.stdin.pause();
  }
  schedule();
});
process.stdin.on("error", () => {}); // a pulled cable: the board keeps running
process.stdin.on("end", () => {});

// TX as a real PL011 does it, which rp2040js 1.4.1 leaves as a TODO: there, the TX
// interrupt is raised again the moment it is cleared (an interrupt storm that hangs
// MicroPython's UART driver, which enables it), and the TX FIFO is never full. Here a
// 32-byte TX FIFO drains at the line rate, is full (TXFF) when it holds 32, and raises the
// TX interrupt when its level falls to the trigger (half full), once, until cleared.
const UART_TXFF = 1 << 5;
const UART_TXINTR = 1 << 5;
const TX_FIFO = 32;
const TX_TRIGGER = 16;
let txFifo = 0; // bytes waiting in the TX FIFO (they are in txLine)
const txLine = [];
let txBuf = [];
Object.defineProperty(uart, "flags", {
  get() {
    const rx = (uart.rxFIFO.full ? 1 << 6 : 0) | (uart.rxFIFO.empty ? 1 << 4 : 0);
    return rx | (txFifo >= TX_FIFO ? UART_TXFF : 0) | (txFifo === 0 ? 1 << 7 : 0) |
      (txFifo > 0 ? 1 << 3 : 0); // TXFE, BUSY
  },
});
uart.checkInterrupts = function () {
  this.rp2040.setInterrupt(this.irq, !!(this.interruptStatus & this.interruptMask));
};
const txAlarm = clock.createAlarm(drainTx);
uart.onByte = (b) => {
  if (txFifo >= TX_FIFO) return; // written while full: lost, as on the real UART
  txLine.push(b);
  txFifo++;
  if (txFifo === 1) txAlarm.schedule(byteNanos);
};
function drainTx() {
  txBuf.push(txLine.shift());
  txFifo--;
  if (txFifo > 0) txAlarm.schedule(byteNanos);
  if (txFifo <= TX_TRIGGER) {
    uart.interruptStatus |= UART_TXINTR;
    uart.checkInterrupts();
  }
}
function flushTx() {
  if (txBuf.length) {
    const out = Buffer.from(txBuf);
    bytesOut += out.length;
    txBuf = [];
    try {
      fs.writeSync(1, out);
    } catch (e) {
      // EAGAIN on a full pty, or EIO with nobody at the other end: the bytes are lost on
      // the line, as on a real UART
    }
  }
}

// ---- the run loop ----------------------------------------------------------------------
const LEAD_NANOS = 2e6; // how far the emulated clock may run ahead of the wall clock
const start = process.hrtime.bigint();
const cycleNanos = 1e9 / 125e6;
let finished = false;

// --steady-clock: an idle core's clock moves on no faster than the wall clock does while
// the runner waits (for input, between turns), and never catches up what a busy core
// lost. By default an idle core jumps to its next timer as long as it is behind the wall
// clock: on a machine where the emulator runs slower than real time, a board waiting a
// moment for the bridge's bytes then finds seconds gone, and the transfers it times on its
// own clock count the host's slowness. With it, the board's clock counts its own work and
// the line.
let idleSince = null; // the wall time when the last turn ended (--steady-clock)

function step() {
  if (finished) return;
  const wall = Number(process.hrtime.bigint() - start);
  const limit = opts.fast ? Infinity : wall + LEAD_NANOS;
  const idleLimit = opts.steadyClock && idleSince !== null
    ? clock.nanos + Math.max(0, wall - idleSince) : Infinity;
  const core = rp2040.core;
  let idleCapped = false;
  for (let i = 0; i < 200000 && clock.nanos < limit; i++) {
    if (core.waiting) {
      const dt = Math.min(clock.nanosToNextAlarm, limit - clock.nanos, idleLimit - clock.nanos);
      if (!(dt > 0) || dt === Infinity) {
        idleCapped = idleLimit - clock.nanos <= 0;
        break;
      }
      clock.tick(dt);
    } else {
      clock.tick(core.executeInstruction() * cycleNanos);
    }
  }
  flushTx();
  idleSince = Number(process.hrtime.bigint() - start);
  if (clock.nanos >= limit || idleCapped) setTimeout(step, 1);
  else setImmediate(step);
}

function finish(code) {
  if (finished) return;
  finished = true;
  flushTx();
  if (usbFd !== 2) fs.closeSync(usbFd);
  flashChip.close();
  if (debug) {
    process.stderr.write("[debug] flash: " + flashChip.erases + " sectors erased, " +
      flashChip.programs + " pages programmed, " + flashChip.bytesWritten +
      " bytes written through; " + rxLost + " UART bytes lost to them (--overrun); " +
      "emulated " + (clock.nanos / 1e6).toFixed(0) + " ms\n");
  }
  process.exit(code);
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => finish(0));
if (opts.timeoutS > 0) {
  setTimeout(() => {
    process.stderr.write("pico.mjs: timed out after " + opts.timeoutS + " s (PC 0x" +
      (rp2040.core.PC >>> 0).toString(16) + ")\n");
    finish(3);
  }, opts.timeoutS * 1000);
}
if (debug) {
  setInterval(() => {
    process.stderr.write("[debug] t=" + (clock.nanos / 1e6).toFixed(1) + "ms PC=0x" +
      (rp2040.core.PC >>> 0).toString(16) + " uart0 ris=0x" + uart.interruptStatus.toString(16) +
      " imsc=0x" + uart.interruptMask.toString(16) + " rx=" + uart.rxFIFO.itemCount +
      " rxq=" + (rxQueue.length - rxHead) + " tx=" + txFifo + " in=" + bytesIn + " fed=" +
      bytesFed + " out=" + bytesOut + "\n");
  }, 500).unref();
}
step();
