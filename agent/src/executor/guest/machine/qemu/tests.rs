use super::*;

#[test]
fn two_nodes_split_cpus_and_memory() {
    let m = Machine::default();
    let a = argv(&m, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
    assert!(a.contains("-accel tcg -cpu max -m 512 -smp 4"), "{a}");
    assert!(
        a.contains(
            "-object memory-backend-ram,id=m0,size=256M -numa node,nodeid=0,cpus=0-1,memdev=m0"
        ),
        "{a}"
    );
    assert!(a.contains("-numa node,nodeid=1,cpus=2-3,memdev=m1"), "{a}");
    assert!(
        a.contains("-serial file:/d/console.log -serial file:/d/channel.log"),
        "{a}"
    );
    assert!(
        a.contains("-append console=ttyS0 quiet panic=-1 sched_verbose"),
        "{a}"
    );
}

#[test]
fn s390x_has_no_numa_and_a_virtio_serial_channel() {
    let m = Machine {
        arch: GuestArch::S390x,
        cpus: 2,
        nodes: 2,
        ..Machine::default()
    };
    let a = argv(&m, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
    assert!(a.starts_with("-accel tcg -m 512 -smp 2 -kernel /k"), "{a}");
    assert!(!a.contains("-numa"), "{a}");
    assert!(a.contains("console=ttysclp0"), "{a}");
    assert!(
        a.ends_with(
            "-serial file:/d/console.log -device virtio-serial-ccw,id=vser \
             -chardev file,id=farmch,path=/d/channel.log \
             -device virtserialport,bus=vser.0,chardev=farmch,name=farm"
        ),
        "{a}"
    );
    let kvm = Machine {
        accel: Accel::Kvm,
        ..Machine::default()
    };
    let a = argv(&kvm, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
    assert!(a.starts_with("-accel kvm -cpu host "), "{a}");
}

#[test]
fn x86_64_reports_on_virtio_serial_when_the_kernel_has_it() {
    let m = Machine {
        channel: Channel::VirtioSerial,
        ..Machine::default()
    };
    let a = argv(&m, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
    assert!(
        a.ends_with(
            "-serial file:/d/console.log -device virtio-serial-pci,id=vser \
             -chardev file,id=farmch,path=/d/channel.log \
             -device virtserialport,bus=vser.0,chardev=farmch,name=farm"
        ),
        "{a}"
    );
    assert_eq!(a.matches("-serial file:").count(), 1, "{a}");
}
