use super::*;

/// Lines of `depmod -b <root> 6.1.0-57-cloud-amd64` (Debian's package
/// ships no modules.dep) for the unpacked linux-image-6.1.0-57-cloud-amd64.
const AMD64_CLOUD: &str = "\
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/char/virtio_console.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
";

/// The same for linux-image-6.1.0-50-s390x: virtio and virtio_ring are
/// built in there.
const S390X: &str = "\
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko
kernel/drivers/char/virtio_console.ko:
kernel/drivers/vhost/vhost_net.ko: kernel/drivers/net/tun.ko kernel/drivers/vhost/vhost.ko kernel/drivers/vhost/vhost_iotlb.ko kernel/drivers/net/tap.ko
kernel/drivers/vhost/vhost.ko: kernel/drivers/vhost/vhost_iotlb.ko
kernel/drivers/vhost/vhost_iotlb.ko:
kernel/drivers/net/tun.ko:
kernel/drivers/net/tap.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
";

#[test]
fn dependencies_come_first() {
    assert_eq!(
        order_from_modules_dep(AMD64_CLOUD, "virtio_console").unwrap(),
        [
            "kernel/drivers/virtio/virtio_ring.ko",
            "kernel/drivers/virtio/virtio.ko",
            "kernel/drivers/char/virtio_console.ko",
        ]
    );
    assert_eq!(
        order_from_modules_dep(AMD64_CLOUD, "virtio-pci").unwrap(),
        [
            "kernel/drivers/virtio/virtio_ring.ko",
            "kernel/drivers/virtio/virtio.ko",
            "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
            "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
            "kernel/drivers/virtio/virtio_pci.ko",
        ]
    );
}

#[test]
fn s390x_needs_virtio_console_alone() {
    assert_eq!(
        order_from_modules_dep(S390X, "virtio_console").unwrap(),
        ["kernel/drivers/char/virtio_console.ko"]
    );
    // vhost before vhost_net even though modules.dep lists it first.
    let order = order_from_modules_dep(S390X, "vhost_net").unwrap();
    let at = |m: &str| order.iter().position(|p| p.ends_with(m)).unwrap();
    assert!(at("/vhost_iotlb.ko") < at("/vhost.ko"));
    assert!(at("/vhost.ko") < at("/vhost_net.ko"));
    assert_eq!(order.len(), 5);
    assert_eq!(order.last().unwrap(), "kernel/drivers/vhost/vhost_net.ko");
}

#[test]
fn unknown_modules_and_cycles_are_errors() {
    let err = order_from_modules_dep(S390X, "virtio_blk").unwrap_err();
    assert!(
        matches!(err, Cause::NotInModulesDep(ref m) if m == "virtio_blk"),
        "{err}"
    );
    assert_eq!(err.to_string(), "`virtio_blk` is not in modules.dep");
    let err = order_from_modules_dep("a.ko: b.ko\nb.ko: a.ko\n", "a").unwrap_err();
    assert!(matches!(err, Cause::Cycle(ref p) if p == "a.ko"), "{err}");
    assert!(err.to_string().contains("cycle"), "{err}");
    let err = order_from_modules_dep("a.ko: c.ko\n", "a").unwrap_err();
    assert!(
        matches!(err, Cause::NoDepLine(ref p) if p == "c.ko"),
        "{err}"
    );
}

#[test]
fn module_names() {
    assert_eq!(
        module_name("kernel/drivers/char/virtio_console.ko").as_deref(),
        Some("virtio_console")
    );
    assert_eq!(
        module_name("kernel/x/snd-hda.ko.xz").as_deref(),
        Some("snd_hda")
    );
    assert_eq!(module_name("modules.dep"), None);
}

#[test]
fn modinfo_depends_lists() {
    // `readelf -p .modinfo virtio_console.ko` of 6.1.0-50-s390x.
    let s390x = "
String dump of section '.modinfo':
  [     0]  license=GPL
  [     c]  description=Virtio console driver
  [    2e]  alias=virtio:d00000003v*
  [    47]  depends=
  [    50]  intree=Y
  [    59]  name=virtio_console
  [    6d]  vermagic=6.1.0-50-s390x SMP mod_unload modversions 
";
    assert!(modinfo_depends(s390x).is_empty());
    let amd64 = "  [    47]  depends=virtio,virtio_ring\n  [    77]  name=virtio_console\n";
    assert_eq!(modinfo_depends(amd64), ["virtio", "virtio_ring"]);
}

#[test]
fn a_tree_without_modules_dep_uses_modinfo_and_builtins() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("modules.builtin"),
        "kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_ring.ko\n",
    )
    .unwrap();
    assert!(load_order(dir.path(), "virtio_ring").unwrap().is_empty());
    let err = load_order(dir.path(), "virtio_console")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("virtio_console") && err.contains("no module file"),
        "{err}"
    );
    fs::write(dir.path().join("modules.dep"), S390X).unwrap();
    assert_eq!(
        load_order(dir.path(), "virtio_console").unwrap(),
        [dir.path().join("kernel/drivers/char/virtio_console.ko")]
    );
}
