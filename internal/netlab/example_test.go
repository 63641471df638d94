package netlab_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/hetcomm/hetcomm/internal/netlab"
)

func Example() {
	topo, err := netlab.Parse(strings.NewReader(`{
		"name": "demo",
		"bridges": [{"name": "lan"}],
		"hosts": [
			{"name": "fast", "nics": [{"bridge": "lan", "rate_out": 400, "rate_in": 400}]},
			{"name": "slow", "nics": [{"bridge": "lan", "rate_out": 20, "rate_in": 50, "loss": 1}]}
		]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	addrs, _ := topo.HostAddrs()
	fmt.Println("slow is at", addrs["slow"][0])
	r, _ := topo.ExpectedRate("fast", "slow")
	fmt.Println("fast -> slow:", r, "Mbit/s")
	r, _ = topo.ExpectedRate("slow", "fast")
	fmt.Println("slow -> fast:", r, "Mbit/s")

	// The commands Up would run as root (here: the shaping of slow's NIC).
	cmds, _ := topo.UpCommands(netlab.Prefix(topo.Name))
	for _, c := range cmds {
		if s := c.String(); strings.Contains(s, " tbf ") && strings.Contains(s, "h1e0") || strings.Contains(s, "nl-demo.slow qdisc") {
			fmt.Println(s)
		}
	}

	_, err = netlab.Parse(strings.NewReader(`{"name": "demo", "bridges": [{"name": "lan"}],
		"hosts": [{"name": "a", "nics": [{"bridge": "wan", "rate_out": 1, "rate_in": 1}]}]}`))
	fmt.Println(err)
	// Output:
	// slow is at 10.77.1.2
	// fast -> slow: 50 Mbit/s
	// slow -> fast: 20 Mbit/s
	// tc -n nl-demo.slow qdisc add dev eth0 root tbf rate 20000000bit burst 16000 limit 4194304
	// tc -n nl-demo_sw qdisc add dev h1e0 root tbf rate 50000000bit burst 16000 limit 1048576
	// netlab: topology: host "a" nics[0]: unknown bridge "wan"
}
