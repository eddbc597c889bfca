// RegisterInstance registers one instance of a service with Apache Curator's
// ServiceDiscovery (curator-x-discovery), as a Java service would, and keeps
// it registered until its standard input closes; then it unregisters the
// instance, closes its Curator client (its session ends at once) and exits.
//
// Arguments: connectString basePath serviceName instanceId address port.
// Output: "REGISTERED <path>" once the instance's node exists, "CLOSED" at
// the end; errors on stderr and a non-zero exit status.
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;

public class RegisterInstance {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: RegisterInstance connectString basePath serviceName instanceId address port");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(200, 10))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println("no connection to " + args[0] + " within 30 s");
            System.exit(1);
        }
        ServiceInstance<Void> instance = ServiceInstance.<Void>builder()
                .name(args[2])
                .id(args[3])
                .address(args[4])
                .port(Integer.parseInt(args[5]))
                .build();
        ServiceDiscovery<Void> discovery = ServiceDiscoveryBuilder.builder(Void.class)
                .client(client)
                .basePath(args[1])
                .thisInstance(instance)
                .build();
        discovery.start(); // registers thisInstance
        System.out.println("REGISTERED " + args[1] + "/" + args[2] + "/" + instance.getId());
        System.out.flush();
        while (System.in.read() != -1) {
            // until the Go side closes our stdin
        }
        discovery.close(); // unregisters
        client.close();
        System.out.println("CLOSED");
        System.out.flush();
    }
}
