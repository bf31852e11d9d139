package serverinfo

import "testing"

func TestCPUSeconds(t *testing.T) {
	got, err := CPUSeconds("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9\r\n")
	if err != nil || got != 1.75 {
		t.Fatalf("CPUSeconds = %v, %v; want 1.75", got, err)
	}
	for _, bad := range []string{"", "# CPU\r\nused_cpu_sys:1\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n"} {
		if _, err := CPUSeconds(bad); err == nil {
			t.Errorf("CPUSeconds(%q): no error", bad)
		}
	}
}
