// Preloaded into server-everything by the tests: a listen(port) without a host binds to
// 127.0.0.1 only, never to every interface of the machine.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const rest = args.slice(1).filter((arg) => typeof arg !== "string");
    return listen.call(this, Number(args[0]), "127.0.0.1", ...rest);
  }
  return listen.apply(this, args);
};
