// Package discovery registers service instances in ZooKeeper and finds them,
// on the node layout and JSON of Apache Curator's service discovery
// (curator-x-discovery), so that Go services and Java services on Curator or
// Spring Cloud Zookeeper find each other.
//
//	reg, err := discovery.Register(sess, "/services", discovery.Instance{
//		Name: "billing", Address: "10.0.0.7", Port: 8080,
//	})
//	...
//	defer reg.Close() // unregisters
//
//	c, err := discovery.NewCache(sess, "/services", "billing", discovery.WithEvents(false))
//	...
//	defer c.Close()
//	p, err := discovery.NewProvider(c)
//	inst, err := p.Pick()
//
// The package documentation is completed with the implementation.
package discovery
