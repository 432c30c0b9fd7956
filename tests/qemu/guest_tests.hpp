// Every test the guest runs; guest_main.cpp lists them in batch order.
#pragma once

namespace baregpu::qemu {

// edu through the sysfs backend (resource0 + pagemap); runs first, while edu has no driver.
void edu_sysfs_backend();
// edu through the vfio backend (edu_vfio_tests.cpp).
void edu_bind_vfio();
void edu_config_space();
void edu_bar0_registers();
void edu_dma_both_ways();
void edu_msi_interrupt();
// The IOMMU is really in the path: DMA to an IOVA nobody mapped fails (iommu_fault_test.cpp).
void edu_unmapped_iova_faults();
// device_lock between two processes (lock_test.cpp).
void device_lock_two_processes();
// The not-viable refusal when a group peer is on another driver (group_test.cpp).
void group_not_viable();
// NVMe through vfio (nvme_test.cpp).
void nvme_registers();
void nvme_identify_and_read();
// Peer-to-peer: edu's DMA reads NVMe's BAR0 through a VFIO peer mapping (peer_bar_test.cpp).
void vfio_peer_bar_dma();

// The USB batch, a separate dynamically linked program (guest_usb_main.cpp): our libusb backend
// against a FunctionFS gadget on dummy_hcd (usb_libusb_test.cpp).
void libusb_echo_gadget();
// drivers/usb's transport and the usb PciDevice backend against the bridge model served through
// FunctionFS (usb_asm24_test.cpp).
void usb_asm24_transport_tlps();

}  // namespace baregpu::qemu
