use super::*;
use farm_proto::Direction;

/// What an x86_64 guest's runner reported around a `cpu-hog` of 4
/// threads (2 NUMA nodes: cpus 0-1 and 2-3): three sweeps, the kernel
/// threads (session 0) and the runner (session 1) among the tasks, and
/// lines of the job runner this module leaves to its caller.
const X86: &str = r#"farm-job 1
release 6.1.0-31-amd64
node 0 0-1
node 1 2-3
online 0-3
irq before            CPU0       CPU1       CPU2       CPU3       
irq before   0:        141          0          0          0   IO-APIC   2-edge      timer
irq before   1:          0          9          0          0   IO-APIC   1-edge      i8042
irq before   4:          0          4          0          0   IO-APIC   4-edge      ttyS0
irq before   8:          1          0          0          0   IO-APIC   8-edge      rtc0
irq before   9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
irq before  12:          5          0          0          0   IO-APIC  12-edge      i8042
irq before NMI:          0          0          0          0   Non-maskable interrupts
irq before LOC:        595        494        511        553   Local timer interrupts
irq before SPU:          0          0          0          0   Spurious interrupts
irq before PMI:          0          0          0          0   Performance monitoring interrupts
irq before IWI:          0          0          0          0   IRQ work interrupts
irq before RTR:          0          0          0          0   APIC ICR read retries
irq before RES:         28         24         16         15   Rescheduling interrupts
irq before CAL:        236        236        157        215   Function call interrupts
irq before TLB:          0          0          0          0   TLB shootdowns
irq before TRM:          0          0          0          0   Thermal event interrupts
irq before ERR:          0
irq before MIS:          0
irq before PIN:          0          0          0          0   Posted-interrupt notification event
irq before NPI:          0          0          0          0   Nested posted-interrupt event
irq before PIW:          0          0          0          0   Posted-interrupt wakeup event
ctxt before 10432
times before 0m0.010s 0m0.020s
session 230
begin
sample 5.10
task 2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0
task 27 (kworker/2:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 12 0 0 20 0 1 0 30 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 2 0 0 0 0 0 0 0 0 0 0 0 0 0
task 1 (init) S 0 1 1 0 -1 4194560 181 0 0 0 1 4 0 0 20 0 1 0 1 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 229 (sh) S 1 1 1 0 -1 4194560 181 0 0 0 0 0 0 0 20 0 1 0 500 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 230 (farm-workload) S 229 230 230 0 -1 4194560 181 0 0 0 2 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 232 (cpu-hog-1) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 233 (cpu-hog-2) R 229 230 230 0 -1 4194368 181 0 0 0 9 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 234 (cpu-hog-3) R 229 230 230 0 -1 4194368 181 0 0 0 9 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  1026 0 456 11801 6 0 17 0 0 0
cpu cpu0 310 0 120 2890 3 0 5 0 0 0
cpu cpu1 295 0 131 2902 1 0 2 0 0 0
cpu cpu2 301 0 117 2899 0 0 9 0 0 0
cpu cpu3 120 0 88 3110 2 0 1 0 0 0
out cpu_hog_ops 123456 ops higher
sample 5.21
task 2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 2 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0
task 27 (kworker/2:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 13 0 0 20 0 1 0 30 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 2 0 0 0 0 0 0 0 0 0 0 0 0 0
task 1 (init) S 0 1 1 0 -1 4194560 181 0 0 0 1 5 0 0 20 0 1 0 1 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 229 (sh) S 1 1 1 0 -1 4194560 181 0 0 0 0 1 0 0 20 0 1 0 500 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 230 (farm-workload) S 229 230 230 0 -1 4194560 181 0 0 0 2 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 21 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 232 (cpu-hog-1) R 229 230 230 0 -1 4194368 181 0 0 0 19 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 233 (cpu-hog-2) R 229 230 230 0 -1 4194368 181 0 0 0 20 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 234 (cpu-hog-3) R 229 230 230 0 -1 4194368 181 0 0 0 17 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  1065 0 460 11802 6 0 17 0 0 0
cpu cpu0 320 0 121 2890 3 0 5 0 0 0
cpu cpu1 305 0 132 2902 1 0 2 0 0 0
cpu cpu2 311 0 118 2899 0 0 9 0 0 0
cpu cpu3 129 0 89 3111 2 0 1 0 0 0
sample 5.30
task 2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0
task 27 (kworker/2:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 14 0 0 20 0 1 0 30 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 2 0 0 0 0 0 0 0 0 0 0 0 0 0
task 1 (init) S 0 1 1 0 -1 4194560 181 0 0 0 1 6 0 0 20 0 1 0 1 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 229 (sh) S 1 1 1 0 -1 4194560 181 0 0 0 0 2 0 0 20 0 1 0 500 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 230 (farm-workload) S 229 230 230 0 -1 4194560 181 0 0 0 2 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 26 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 232 (cpu-hog-1) R 229 230 230 0 -1 4194368 181 0 0 0 24 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 233 (cpu-hog-2) R 229 230 230 0 -1 4194368 181 0 0 0 29 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 
task 235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  1094 0 462 11807 6 0 17 0 0 0
cpu cpu0 329 0 121 2890 3 0 5 0 0 0
cpu cpu1 313 0 133 2902 1 0 2 0 0 0
cpu cpu2 320 0 118 2899 0 0 9 0 0 0
cpu cpu3 132 0 90 3116 2 0 1 0 0 0
end
exit 0
wall_s 0.25
times after 1m2.340s 0m0.100s
ctxt after 15877
irq after            CPU0       CPU1       CPU2       CPU3       
irq after   0:        141          0          0          0   IO-APIC   2-edge      timer
irq after   1:          0          9          0          0   IO-APIC   1-edge      i8042
irq after   4:          0          4          0          0   IO-APIC   4-edge      ttyS0
irq after   8:          1          0          0          0   IO-APIC   8-edge      rtc0
irq after   9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
irq after  12:          5          0          0          0   IO-APIC  12-edge      i8042
irq after NMI:          0          0          0          0   Non-maskable interrupts
irq after LOC:        622        519        540        561   Local timer interrupts
irq after SPU:          0          0          0          0   Spurious interrupts
irq after PMI:          0          0          0          0   Performance monitoring interrupts
irq after IWI:          0          0          0          0   IRQ work interrupts
irq after RTR:          0          0          0          0   APIC ICR read retries
irq after RES:         40         31         20         15   Rescheduling interrupts
irq after CAL:        240        236        160        215   Function call interrupts
irq after TLB:          0          0          1          0   TLB shootdowns
irq after TRM:          0          0          0          0   Thermal event interrupts
irq after ERR:          0
irq after MIS:          0
irq after PIN:          0          0          0          0   Posted-interrupt notification event
irq after NPI:          0          0          0          0   Nested posted-interrupt event
irq after PIW:          0          0          0          0   Posted-interrupt wakeup event
done"#;

/// An s390x guest of 2 CPUs: no NUMA nodes, `/proc/interrupts` in the
/// s390x format, `times` with 2 fraction digits, no `ctxt` lines.
const S390X: &str = r#"irq before            CPU0       CPU1       
irq before EXT:        525        482 
irq before I/O:          2          4 
irq before AIO:          0          0 
irq before CLK:        426        383   [EXT] Clock Comparator
irq before EXC:         29         18   [EXT] External Call
irq before EMS:         65         75   [EXT] Emergency Signal
irq before TMR:          0          0   [EXT] CPU Timer
irq before TAL:          0          0   [EXT] Timing Alert
irq before PFL:          0          0   [EXT] Pseudo Page Fault
irq before DSD:          0          0   [EXT] DASD Diag
irq before VRT:          0          0   [EXT] Virtio
irq before SCP:          5          6   [EXT] Service Call
irq before IUC:          0          0   [EXT] IUCV
irq before CMS:          0          0   [EXT] CPU-Measurement: Sampling
irq before CMC:          0          0   [EXT] CPU-Measurement: Counter
irq before FTP:          0          0   [EXT] HMC FTP Service
irq before CIO:          0          2   [I/O] Common I/O Layer Interrupt
irq before DAS:          0          0   [I/O] DASD
irq before C15:          0          0   [I/O] 3215
irq before C70:          0          0   [I/O] 3270
irq before TAP:          0          0   [I/O] Tape
irq before VMR:          0          0   [I/O] Unit Record Devices
irq before LCS:          0          0   [I/O] LCS
irq before CTC:          0          0   [I/O] CTC
irq before ADM:          0          0   [I/O] EADM Subchannel
irq before CSC:          0          0   [I/O] CHSC Subchannel
irq before VIR:          2          2   [I/O] Virtual I/O Devices
irq before QAI:          0          0   [AIO] QDIO Adapter Interrupt
irq before APB:          0          0   [AIO] AP Bus
irq before PCF:          0          0   [AIO] PCI Floating Interrupt
irq before PCD:          0          0   [AIO] PCI Directed Interrupt
irq before MSI:          0          0   [AIO] MSI Interrupt
irq before VAI:          0          0   [AIO] Virtual I/O Devices AI
irq before GAL:          0          0   [AIO] GIB Alert
irq before NMI:          0          0   [NMI] Machine Check
irq before RST:          0          1   [CPU] CPU Restart
times before 0m0.00s 0m0.01s
session 301
sample 31.40
task 12 (rcu_sched) I 2 0 0 0 -1 69238880 0 0 0 0 0 6 0 0 20 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu cpu  800 0 300 1528 4 12 9 0 0 0
cpu cpu0 394 0 150 769 2 6 5 0 0 0
cpu cpu1 406 0 150 759 2 6 4 0 0 0
sample 31.50
task 12 (rcu_sched) I 2 0 0 0 -1 69238880 0 0 0 0 0 7 0 0 20 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0
task 301 (farm-workload) R 300 301 301 0 -1 4194560 181 0 0 0 10 1 0 0 20 0 1 0 700 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  812 0 301 1530 4 12 9 0 0 0
cpu cpu0 400 0 150 770 2 6 5 0 0 0
cpu cpu1 412 0 151 760 2 6 4 0 0 0
sample 31.62
task 12 (rcu_sched) I 2 0 0 0 -1 69238880 0 0 0 0 0 8 0 0 20 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0
task 301 (farm-workload) R 300 301 301 0 -1 4194560 181 0 0 0 22 1 0 0 20 0 1 0 700 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  834 0 303 1530 4 12 9 0 0 0
cpu cpu0 411 0 151 770 2 6 5 0 0 0
cpu cpu1 423 0 152 760 2 6 4 0 0 0
begin
out stream_copy_mb_s 812.5 MB/s higher
end
times after 0m0.45s 0m0.04s
irq after            CPU0       CPU1       
irq after EXT:        601        530 
irq after I/O:          2          4 
irq after AIO:          0          0 
irq after CLK:        465        402   [EXT] Clock Comparator
irq after EXC:         41         25   [EXT] External Call
irq after EMS:         70         90   [EXT] Emergency Signal
irq after TMR:          0          0   [EXT] CPU Timer
irq after TAL:          0          0   [EXT] Timing Alert
irq after PFL:          0          0   [EXT] Pseudo Page Fault
irq after DSD:          0          0   [EXT] DASD Diag
irq after VRT:          0          0   [EXT] Virtio
irq after SCP:          5          6   [EXT] Service Call
irq after IUC:          0          0   [EXT] IUCV
irq after CMS:          0          0   [EXT] CPU-Measurement: Sampling
irq after CMC:          0          0   [EXT] CPU-Measurement: Counter
irq after FTP:          0          0   [EXT] HMC FTP Service
irq after CIO:          0          2   [I/O] Common I/O Layer Interrupt
irq after DAS:          0          0   [I/O] DASD
irq after C15:          0          0   [I/O] 3215
irq after C70:          0          0   [I/O] 3270
irq after TAP:          0          0   [I/O] Tape
irq after VMR:          0          0   [I/O] Unit Record Devices
irq after LCS:          0          0   [I/O] LCS
irq after CTC:          0          0   [I/O] CTC
irq after ADM:          0          0   [I/O] EADM Subchannel
irq after CSC:          0          0   [I/O] CHSC Subchannel
irq after VIR:          2          2   [I/O] Virtual I/O Devices
irq after QAI:          0          0   [AIO] QDIO Adapter Interrupt
irq after APB:          0          0   [AIO] AP Bus
irq after PCF:          0          0   [AIO] PCI Floating Interrupt
irq after PCD:          0          0   [AIO] PCI Directed Interrupt
irq after MSI:          0          0   [AIO] MSI Interrupt
irq after VAI:          0          0   [AIO] Virtual I/O Devices AI
irq after GAL:          0          0   [AIO] GIB Alert
irq after NMI:          0          0   [NMI] Machine Check
irq after RST:          0          1   [CPU] CPU Restart"#;

/// Kinds of the job runner's own lines, which are the caller's.
const CALLERS: &[&str] = &[
    "farm-job", "release", "online", "begin", "out", "end", "exit", "wall_s", "done",
];

/// Feeds `text` as `parse_run` splits it.
fn feed(text: &str) -> Observed {
    let mut obs = Observed::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        let known = obs.line(kind, rest).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(known, !CALLERS.contains(&kind), "{line}");
    }
    obs
}

fn value(metrics: &[Metric], name: &str) -> Option<f64> {
    metrics.iter().find(|m| m.name == name).map(|m| m.value)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn an_x86_guest_with_two_nodes() {
    let obs = feed(X86);
    assert_eq!(obs.skipped_tasks(), 1, "the empty task line of sweep 3");
    let (metrics, t) = build(&obs, 0.25, &[0, 1, 2, 3], 100, &Default::default()).unwrap();
    // RES 12 + 7 + 4 + 0, CAL 4 + 0 + 3 + 0, TLB 1 on cpu2.
    assert_eq!(value(&metrics, "rescheduling_ipis"), Some(23.0));
    assert_eq!(value(&metrics, "function_call_ipis"), Some(7.0));
    assert_eq!(value(&metrics, "tlb_shootdowns"), Some(1.0));
    assert_eq!(value(&metrics, "mixed_ipis"), None);
    let res = t.irqs.iter().find(|d| d.name == "RES").unwrap();
    assert_eq!(res.ipi, "rescheduling");
    assert_eq!(
        res.per_cpu,
        [(0, 12), (1, 7), (2, 4), (3, 0)].into_iter().collect()
    );
    // 1m2.340s - 0m0.010s and 0m0.100s - 0m0.020s.
    assert!(
        close(value(&metrics, "user_s").unwrap(), 62.33),
        "{metrics:?}"
    );
    assert!(
        close(value(&metrics, "sys_s").unwrap(), 0.08),
        "{metrics:?}"
    );
    assert_eq!(value(&metrics, "context_switches"), Some(5445.0));
    for name in ["user_s", "sys_s", "context_switches"] {
        let m = metrics.iter().find(|m| m.name == name).unwrap();
        assert_eq!(m.direction, Direction::LowerIsBetter as i32, "{name}");
    }
    assert_eq!(
        metrics
            .iter()
            .find(|m| m.name == "context_switches")
            .unwrap()
            .unit,
        "switches"
    );
    assert_eq!(value(&metrics, "task_clock_s"), None, "no perf in a guest");

    // The 6 threads of session 230 only; the kernel's and the runner's
    // tasks are in no count.
    assert_eq!(t.nodes.len(), 2);
    let (n0, n1) = (&t.nodes[0], &t.nodes[1]);
    assert_eq!((n0.node, n0.cpus, n1.node, n1.cpus), (0, 2, 1, 2));
    assert!(close(n0.avg_threads, 3.0), "{n0:?}");
    assert!(close(n0.avg_runnable, 2.0), "{n0:?}");
    assert!(close(n1.avg_threads, 8.0 / 3.0), "{n1:?}");
    assert!(close(n1.avg_runnable, 5.0 / 3.0), "{n1:?}");
    assert_eq!(n1.peak_threads, 3);
    let ticks: Vec<(u64, Vec<u32>)> = t
        .series
        .iter()
        .map(|s| (s.t_ms, s.threads.clone()))
        .collect();
    assert_eq!(
        ticks,
        [(0, vec![3, 3]), (110, vec![3, 3]), (200, vec![3, 2])]
    );
    // One instance: cpu-hog's threads are workers, not instances. In tid
    // order, the thread `x) R 1 0 0 (y` (235) last.
    assert_eq!(t.instances.len(), 1);
    assert_eq!(t.instances[0].instance, 0);
    assert_eq!(
        t.instances[0].numa_nodes,
        "1/0/0/1/1/0 1/0/0/1/1/0 1/0/0/1/0"
    );
    // Sweeps 110 and 90 ms apart.
    assert_eq!(t.sample_interval_ms, 100);
    assert_eq!(t.threads_read_fraction, 1.0);
    // Between sweeps 2 and 3 a thread waited on cpu0 while cpu3 idled 5
    // ticks: 0.05 CPU-s of 0.2 s × 4 CPUs, on node 1.
    assert!(close(value(&metrics, "wasted_core_s").unwrap(), 0.05));
    assert!(close(value(&metrics, "wasted_core_pct").unwrap(), 6.25));
    assert!(close(t.wasted_cpu_s_per_node[&1], 0.05));
    assert!(close(t.wasted_cpu_s_per_node[&0], 0.0));
    // The caller's.
    assert!(t.topology_source.is_empty() && t.topology_before.is_empty());
    assert!(t.topology_after.is_empty() && t.topology_changes.is_empty());
}

#[test]
fn an_s390x_guest_without_nodes() {
    let obs = feed(S390X);
    let (metrics, t) = build(&obs, 0.2, &[0, 1], 100, &Default::default()).unwrap();
    // EXC 12 + 7, EMS 5 + 15: reschedules and function calls together.
    assert_eq!(value(&metrics, "mixed_ipis"), Some(39.0));
    // Not counted apart on s390x: not reported, rather than zero.
    assert_eq!(value(&metrics, "rescheduling_ipis"), None);
    let exc = t.irqs.iter().find(|d| d.name == "EXC").unwrap();
    assert_eq!(exc.ipi, "mixed");
    assert_eq!(exc.per_cpu, [(0, 12), (1, 7)].into_iter().collect());
    // 2 fraction digits.
    assert!(close(value(&metrics, "user_s").unwrap(), 0.45));
    assert!(close(value(&metrics, "sys_s").unwrap(), 0.03));
    assert_eq!(value(&metrics, "context_switches"), None, "no ctxt lines");
    // One node of the online CPUs.
    assert_eq!(t.nodes.len(), 1);
    assert_eq!((t.nodes[0].node, t.nodes[0].cpus), (0, 2));
    assert!(close(t.nodes[0].avg_threads, 1.0));
    assert!(close(t.nodes[0].avg_runnable, 1.0));
    // The first sweep, before the workload's thread appeared, is dropped.
    let ticks: Vec<u64> = t.series.iter().map(|s| s.t_ms).collect();
    assert_eq!(ticks, [0, 120]);
    assert_eq!(t.sample_interval_ms, 120);
    assert_eq!(t.instances[0].numa_nodes, "0 0");
    assert_eq!(value(&metrics, "wasted_core_s"), Some(0.0));
}

#[test]
fn thread_instances_as_the_sampler_numbers_them() {
    let task = |tid: u32, comm: &str, cpu: u32| {
        format!(
            "task {tid} ({comm}) R 400 401 401 0 -1 4194368 0 0 0 0 5 0 0 0 20 0 3 0 \
             900 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 -1 {cpu} 0 0 0 0 0 \
             0 0 0 0 0 0 0 0"
        )
    };
    let text = [
        "session 401".to_owned(),
        "sample 2.00".to_owned(),
        task(401, "farm-workload", 0),
        task(402, "stream-0", 0),
        task(403, "stream-1", 1),
    ]
    .join("\n");
    let (_, t) = build(&feed(&text), 1.0, &[0, 1], 100, &Default::default()).unwrap();
    let instances: Vec<(u32, &str)> = t
        .instances
        .iter()
        .map(|i| (i.instance, i.numa_nodes.as_str()))
        .collect();
    // The main thread, waiting for them, is no instance and left out.
    assert_eq!(instances, [(0, "0"), (1, "0")]);
    assert!(close(t.nodes[0].avg_threads, 2.0));
}

#[test]
fn comm_with_spaces_and_parentheses() {
    // A naive split at the first `)` reads state R and session 0.
    let line = "235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 \
                6 0 512 138407936 310 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 -1 \
                3 0 0 0 0 0 1 1 1 1 1 1 1 0";
    let t = parse_task(line).unwrap().unwrap();
    assert_eq!((t.tid, t.state, t.session, t.cpu), (235, 'S', 230, 3));
    let line = line.replacen("(x) R 1 0 0 (y)", "((a)) (b))", 1);
    let t = parse_task(&line).unwrap().unwrap();
    assert_eq!((t.tid, t.state, t.session), (235, 'S', 230));
}

#[test]
fn tasks_cut_short_by_an_exiting_thread_are_skipped() {
    let mut obs = Observed::new();
    obs.line("sample", "1.00").unwrap();
    for rest in [
        "",
        "  ",
        "231 (cpu-ho",
        "231 (cpu-hog-0)",
        "231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6",
        "231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6 0 512 13840",
        // Seen from a 6.1 guest: a zombie thread whose pids are unlinked.
        "147 (farm-workload) Z 0 -1 -1 0 -1 4227084 158 0 0 0 3 1 0 0 20 0 0 0 201 0 0 0 0 \
         0 0 0 0 0 0 0 0 1 0 0 17 0",
    ] {
        assert_eq!(obs.line("task", rest), Ok(true), "{rest:?}");
    }
    assert_eq!(obs.skipped_tasks(), 7);
    assert!(obs.sweeps[0].tasks.is_empty());
}

/// A task line of session 230 on cpu `cpu`.
#[test]
fn migrations_are_each_threads_last_count_summed() {
    let mig = |tid: u32, n: u64| {
        format!(
            "mig /proc/230/task/{tid}/sched:se.nr_migrations                      :                   {n}"
        )
    };
    let text = [
        "session 230".to_string(),
        "times before 0m0.00s 0m0.00s".into(),
        "sample 1.00".into(),
        format!("task {}", full_task(231, "R", "230")),
        format!("task {}", full_task(232, "R", "230")),
        format!("task {}", full_task(300, "S", "1")),
        mig(231, 3),
        mig(232, 1),
        mig(300, 50),
        "sample 1.50".into(),
        format!("task {}", full_task(231, "R", "230")),
        mig(231, 7),
        // 232 exited before this sweep: its last count stands.
        "times after 0m1.00s 0m0.50s".into(),
        "sampler 0m0.01s 0m0.02s 0m0.004s 0m0.011s".into(),
    ]
    .join("\n");
    let obs = feed(&text);
    let (metrics, t) = build(&obs, 1.0, &[0, 1], 100, &Default::default()).unwrap();
    // 45 ms of sampling against 1.5 s of the workload's CPU.
    assert!(close(
        value(&metrics, "telemetry_overhead_pct").unwrap(),
        3.0
    ));
    assert_eq!(t.sample_interval_ms, 500);
    let mut twice = feed(&text);
    assert!(
        twice
            .line("sampler", "0m0.01s 0m0.02s 0m0.00s 0m0.00s")
            .unwrap_err()
            .to_string()
            .contains("second")
    );
    assert!(Observed::new().line("sampler", "0m0.01s 0m0.02s").is_err());
    // 7 + 1; the runner's task (session 1) is in no count.
    assert_eq!(value(&metrics, "cpu_migrations"), Some(8.0));
    assert!(close(value(&metrics, "cpus_utilised").unwrap(), 1.5));
    let m = metrics.iter().find(|m| m.name == "cpus_utilised").unwrap();
    assert_eq!(m.direction, Direction::HigherIsBetter as i32);

    let mut obs = Observed::new();
    obs.line("sample", "1.00").unwrap();
    for bad in [
        "/proc/230/task/231/sched se.nr_migrations 3",
        "/proc/230/task/x/sched:se.nr_migrations : 3",
        "/etc/passwd:se.nr_migrations : 3",
        "/proc/230/task/231/sched:se.nr_wakeups : 3",
        "/proc/230/task/231/sched:se.nr_migrations : -1",
        "/proc/230/task/231/sched:se.nr_migrations : 999999999999999999",
    ] {
        let e = obs.line("mig", bad).unwrap_err().to_string();
        assert!(e.starts_with("malformed mig line"), "{bad}: {e}");
    }
    let mut obs = Observed::new();
    assert!(
        obs.line("mig", &mig(1, 1)[4..])
            .unwrap_err()
            .to_string()
            .contains("before any")
    );
}

fn full_task(tid: u32, state: &str, session: &str) -> String {
    format!(
        "{tid} (cpu-hog-0) {state} 229 230 {session} 0 -1 4194368 181 0 0 0 10 1 0 0 20 \
         0 6 0 512 138407936 310 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 -1 2 0 0 \
         0 0 0 1 1 1 1 1 1 1 0"
    )
}

#[test]
fn malformed_lines_are_errors_naming_them() {
    let header = "           CPU0       CPU1       ";
    let base = || {
        let mut obs = Observed::new();
        for (kind, rest) in [
            ("node", "0 0-1"),
            ("times", "before 0m0.010s 0m0.020s"),
            ("ctxt", "before 7"),
            ("irq", format!("before {header}").as_str()),
            ("session", "230"),
            ("sample", "1.00"),
            ("task", full_task(231, "R", "230").as_str()),
            ("cpu", "cpu0 1 2 3 4"),
            ("cpu", "cpu  1 2 3 4"),
        ] {
            assert_eq!(obs.line(kind, rest), Ok(true), "{kind} {rest}");
        }
        obs
    };
    let bad: &[(&str, &str)] = &[
        ("node", "x 0-1"),
        ("node", "-1 0-1"),
        ("node", "1 0-"),
        ("node", "1 3-2"),
        ("node", "0 2-3"),
        ("node", "1 1-2"),
        ("times", "before 0m1.230s"),
        ("times", "during 0m1.230s 0m0.100s"),
        ("times", "after 1.230s 0m0.100s"),
        ("times", "after 0m1.2s 0m0.100s"),
        ("times", "after 0m1.2300s 0m0.100s"),
        ("times", "after 0m61.000s 0m0.100s"),
        ("times", "after 0m1.230 0m0.100s"),
        ("times", "after +0m1.230s 0m0.100s"),
        ("times", "after 0m1.230s 0m0.100s extra"),
        ("times", "before 0m0.010s 0m0.020s"),
        ("ctxt", "after"),
        ("ctxt", "after x"),
        ("ctxt", "after +5"),
        ("ctxt", "after -5"),
        ("ctxt", "after 1 2"),
        ("ctxt", "after 99999999999999999999"),
        ("ctxt", "before 8"),
        ("irq", "during CPU0"),
        ("irq", "before RES:          1   Rescheduling interrupts"),
        ("irq", "before RES"),
        ("irq", &format!("before {header}")),
        (
            "irq",
            "after RES:          1          2   Rescheduling interrupts",
        ),
        ("session", "x"),
        ("session", "0"),
        ("session", "1"),
        ("session", "-230"),
        ("session", "231"),
        ("sample", "12,34"),
        ("sample", "abc"),
        ("sample", ""),
        ("sample", "1."),
        ("sample", "0.50"),
        ("sample", "1.00"),
        (
            "task",
            &full_task(231, "R", "230").replacen("231", "abc", 1),
        ),
        ("task", &full_task(232, "RR", "230")),
        ("task", &full_task(232, "R", "x")),
        ("task", "232 cpu-hog-0 R 229 230 230"),
        ("task", "232 (cpu-hog-0) R 229 230 abc"),
        ("task", &full_task(231, "R", "230")),
        ("cpu", "cpux 1 2 3 4"),
        ("cpu", "cpu0 1 2 3"),
        ("cpu", "intr 1 2 3 4"),
        ("cpu", "cpu1 1 2 x 4"),
        ("cpu", "cpu1 -1 2 3 4"),
        ("cpu", "cpu0 1 2 3 4"),
        ("cpu", "cpu 1 2 3 4"),
    ];
    for (kind, rest) in bad {
        let Err(err) = base().line(kind, rest) else {
            panic!("`{kind} {rest}` was accepted");
        };
        let err = err.to_string();
        let quoted = format!("`{}`", cut(&format!("{kind} {rest}")));
        assert!(err.contains(&quoted), "{kind} {rest}: {err}");
        assert!(err.starts_with(&format!("malformed {kind} line")), "{err}");
    }
    // Before any sweep.
    for (kind, rest) in [
        ("task", full_task(231, "R", "230")),
        ("cpu", "cpu0 1 2 3 4".into()),
    ] {
        let err = Observed::new().line(kind, &rest).unwrap_err().to_string();
        assert!(err.contains("before any `sample` line"), "{err}");
    }
    // Long lines are cut.
    let long = format!("after {}", "9".repeat(10_000));
    let err = base().line("ctxt", &long).unwrap_err().to_string();
    assert!(err.len() < 500, "{}", err.len());
}

#[test]
fn missing_parts_are_left_out() {
    let (metrics, t) = build(&Observed::new(), 1.0, &[0, 1], 100, &Default::default()).unwrap();
    assert!(metrics.is_empty(), "{metrics:?}");
    assert!(t.nodes.iter().all(|n| n.avg_threads == 0.0));
    assert!(t.series.is_empty() && t.irqs.is_empty() && t.instances.is_empty());
    let obs = feed("ctxt before 100\nctxt after 250");
    let (metrics, _) = build(&obs, 1.0, &[0, 1], 100, &Default::default()).unwrap();
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["context_switches"]);
}

#[test]
fn the_samplers_counts_stand_for_perfs_as_on_hosts() {
    let text = "times before 0m0.000s 0m0.000s\ntimes after 0m1.500s 0m0.500s\n\
                ctxt before 100\nctxt after 250\n\
                counts 2000000000 4321 17 99\nsampler 0m0.004s 0m0.004s 0m0.000s 0m0.000s";
    let (metrics, _) = build(&feed(text), 4.0, &[0, 1], 100, &Default::default()).unwrap();
    let mut got: Vec<(&str, f64)> = metrics.iter().map(|m| (m.name.as_str(), m.value)).collect();
    got.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(
        got,
        [
            ("context_switches", 4321.0),
            ("cpu_migrations", 17.0),
            ("cpus_utilised", 0.5),
            ("page_faults", 99.0),
            ("sys_s", 0.5),
            ("task_clock_s", 2.0),
            // 8 ms against the task clock's 2 s.
            ("telemetry_overhead_pct", 0.4),
            ("user_s", 1.5),
        ]
    );
    for (text, want) in [
        ("counts 1 2 3", "expected four counts"),
        ("counts 1 2 3 x", "expected four counts"),
        ("counts 1 2 3 4 5", "expected four counts"),
        ("counts 1 2 3 4\ncounts 1 2 3 4", "a second `counts` line"),
    ] {
        let mut obs = Observed::new();
        let err = text
            .lines()
            .map(|l| {
                let (k, r) = l.split_once(' ').unwrap();
                obs.line(k, r)
            })
            .find_map(Result::err)
            .unwrap_or_else(|| panic!("{text}: accepted"));
        assert!(err.to_string().contains(want), "{text}: {err}");
    }
}

#[test]
fn unpaired_or_inconsistent_readings_are_errors() {
    for (text, want) in [
        (
            "times before 0m0.010s 0m0.020s",
            "`times before` without `times after`",
        ),
        ("ctxt after 5", "`ctxt after` without `ctxt before`"),
        (
            "irq before            CPU0",
            "`irq before` lines without `irq after`",
        ),
        (
            "irq after            CPU0",
            "`irq after` lines without `irq before`",
        ),
        ("sample 1.00\ncpu cpu 1 2 3 4", "no `session` line"),
        ("session 5\nsample 1.00\ncpu cpu0 1 2 3 4", "no `cpu` line"),
        ("ctxt before 9\nctxt after 8", "ctxt went backwards"),
        (
            "times before 0m1.000s 0m0.000s\ntimes after 0m0.500s 0m0.000s",
            "user time went backwards",
        ),
        (
            "irq before CPU0\nirq before RES: 9 Rescheduling interrupts\n\
             irq after CPU0\nirq after RES: 5 Rescheduling interrupts",
            "RES on cpu0 went backwards",
        ),
    ] {
        let err = build(&feed(text), 1.0, &[0], 100, &Default::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{text}: {err}");
    }
    for wall in [f64::NAN, -1.0, f64::INFINITY] {
        assert!(
            build(&Observed::new(), wall, &[0], 100, &Default::default()).is_err(),
            "{wall}"
        );
    }
}

#[test]
fn schedstat_readings_become_balancing_per_level() {
    let before = include_str!("../../../../telemetry/schedstat/v16-6.12-2node.txt");
    // Later: cpu0's NUMA level balanced newly idle 4 more times, pulling 2.
    // And the tasks on cpu1 waited 0.5 s more for it.
    let after = before
        .replacen(
            "domain1 f 0 0 0 0 0 0 0 0 8 8 0 1 0 0 0 7 1 1 0 0 0 0 0 1",
            "domain1 f 0 0 0 0 0 0 0 0 8 8 0 1 0 0 0 7 5 3 0 0 2 0 0 1",
            1,
        )
        .replacen(
            "cpu1 0 0 17 8 6 6 2798046498 201778218 268",
            "cpu1 0 0 17 8 6 6 2798046498 701778218 300",
            1,
        );
    assert_ne!(after, before);
    let mut obs = Observed::new();
    for (phase, text) in [("before", before), ("after", after.as_str())] {
        for line in text.lines() {
            assert!(obs.line("schedstat", &format!("{phase} {line}")).unwrap());
        }
    }
    let domains: BTreeMap<u32, Vec<String>> = (0..4)
        .map(|c| (c, vec!["MC".into(), "NUMA".into()]))
        .collect();
    let (metrics, _) = build(&obs, 1.0, &[0, 1, 2, 3], 100, &domains).unwrap();
    assert_eq!(value(&metrics, "lb_numa_newidle"), Some(4.0));
    assert_eq!(value(&metrics, "lb_numa_newidle_gained"), Some(2.0));
    assert_eq!(value(&metrics, "lb_mc_newidle"), Some(0.0));
    // The run's wait from the runqueues, with no sweep at all.
    assert_eq!(value(&metrics, "runqueue_wait_s"), Some(0.5));
    assert_eq!(value(&metrics, "runqueue_wait_p99_us"), None);
    // A reading without its pair, or one that does not parse, is an error.
    let mut half = Observed::new();
    half.line("schedstat", "before version 16").unwrap();
    let e = build(&half, 1.0, &[0], 100, &domains)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "`schedstat before` without `schedstat after`");
    let mut bad = Observed::new();
    bad.line("schedstat", "before version 99").unwrap();
    bad.line("schedstat", "after version 16").unwrap();
    let e = build(&bad, 1.0, &[0], 100, &domains)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("schedstat: /proc/schedstat line 1: a version"),
        "{e}"
    );
}

// ---------------------------------------------------------------- vcpus

fn vcpu_metrics(lines: &[&str]) -> Vec<(String, f64)> {
    let mut obs = Observed::new();
    for line in lines {
        let (kind, rest) = line.split_once(' ').unwrap();
        assert!(obs.line(kind, rest).unwrap(), "{line}");
    }
    vcpus::metrics(&obs.sweeps)
        .into_iter()
        .map(|m| (m.name, m.value))
        .collect()
}

#[test]
fn vcpus_online_and_the_share_stolen() {
    // A 2-vCPU KVM guest whose host ran something else for 40 of the
    // 320 ticks between the first sweep and the last.
    assert_eq!(
        vcpu_metrics(&[
            "sample 5.10",
            "cpu cpu  1000 0 100 500 0 0 0 100 0 0",
            "cpu cpu0 500 0 50 250 0 0 0 50 0 0",
            "cpu cpu1 500 0 50 250 0 0 0 50 0 0",
            "sample 5.60",
            "cpu cpu  1100 0 110 530 0 0 0 120 0 0",
            "sample 6.10",
            "cpu cpu  1200 0 120 560 0 0 0 140 0 0",
            "cpu cpu0 600 0 60 280 0 0 0 70 0 0",
            "cpu cpu1 600 0 60 280 0 0 0 70 0 0",
        ]),
        [
            ("guest_cpus".to_string(), 2.0),
            ("steal_pct".to_string(), 12.5)
        ]
    );
    // TCG accounts no steal; one sweep has no interval to speak of.
    assert_eq!(
        vcpu_metrics(&[
            "sample 5.10",
            "cpu cpu  1026 0 456 11801 6 0 17 0 0 0",
            "cpu cpu0 310 0 120 2890 3 0 5 0 0 0",
        ]),
        [("guest_cpus".to_string(), 1.0)]
    );
    assert_eq!(vcpu_metrics(&["sample 5.10"]), []);
}

// ---------------------------------------------------------------- calibrate

#[test]
fn a_line_out_of_bounds_is_refused_naming_it() {
    let long = "9".repeat(300);
    for (rest, error) in [
        (
            "",
            "malformed calibrate line `calibrate `: \"\" is not a count of iterations from \
             1 to 1000000000",
        ),
        (
            "400000",
            "malformed calibrate line `calibrate 400000`: expected `calibrate \
             <iterations> <ns>...` with 1 to 16 times",
        ),
        (
            "0 1000000",
            "malformed calibrate line `calibrate 0 1000000`: \"0\" is not a count of \
             iterations from 1 to 1000000000",
        ),
        (
            "400000 1000000 999",
            "malformed calibrate line `calibrate 400000 1000000 999`: \"999\" is not a \
             time in ns from 1 µs to 60 s",
        ),
        (
            "400000 60000000001",
            "malformed calibrate line `calibrate 400000 60000000001`: \"60000000001\" is \
             not a time in ns from 1 µs to 60 s",
        ),
        (
            "400000 -1000000",
            "malformed calibrate line `calibrate 400000 -1000000`: \"-1000000\" is not a \
             time in ns from 1 µs to 60 s",
        ),
        (
            "400000  1000000",
            "malformed calibrate line `calibrate 400000  1000000`: \"\" is not a time in \
             ns from 1 µs to 60 s",
        ),
        (
            &format!("400000{}", " 1000000".repeat(17)),
            "malformed calibrate line `calibrate 400000 1000000 1000000 1000000 1000000 \
             1000000 1000000 1000000 1000000 1000000 1000000 1000000 1000000 1000000 \
             1000000 1000000 1000000 1000000`: expected `calibrate <iterations> <ns>...` \
             with 1 to 16 times",
        ),
    ] {
        let mut obs = Observed::new();
        let e = obs.line("calibrate", rest).unwrap_err();
        assert_eq!(e.to_string(), error, "{rest:?}");
        assert_eq!(obs.calibration(), None);
    }
    // Garbage is quoted short: 24 characters of the value, and the
    // line cut as every runner line is.
    let mut obs = Observed::new();
    let e = obs
        .line("calibrate", &format!("400000 {long}"))
        .unwrap_err();
    assert_eq!(
        e.reason.to_string(),
        format!(
            "\"{}...\" is not a time in ns from 1 µs to 60 s",
            "9".repeat(24)
        )
    );
    assert!(e.line.len() < 170, "{}", e.line);
    // One calibration a run.
    let mut obs = Observed::new();
    assert_eq!(obs.line("calibrate", "400000 1000000"), Ok(true));
    assert_eq!(
        obs.line("calibrate", "400000 1000000")
            .unwrap_err()
            .to_string(),
        "malformed calibrate line `calibrate 400000 1000000`: a second `calibrate` line"
    );
    assert_eq!(
        obs.calibration(),
        Some(&slowdown::Calibration {
            iterations: 400000,
            median_ns: 1000000
        })
    );
}
