#!/bin/sh
# The layers stay one way (README, Code layout): each module imports only the Veneer modules
# below it, and the decorators never see the HTTP/1.1 wire (no import of VeneerHTTP1 or
# VeneerServer, no word of lines or serialization). VeneerCore's interface is the contract a
# decorator needs: what Veneer's own modules share below it is `package`, never `@_spi` (which
# any importer may open).
set -eu
cd "$(dirname "$0")/../.."

allowed() {
    case "$1" in
        VeneerCore) echo "" ;;
        VeneerHTTP1) echo "VeneerCore" ;;
        VeneerServer) echo "VeneerCore VeneerHTTP1" ;;
        VeneerConfig) echo "VeneerCore" ;;
        VeneerStores) echo "VeneerCore" ;;
        VeneerDecorators) echo "VeneerCore VeneerConfig VeneerStores" ;;
        VeneerOrigins) echo "VeneerCore VeneerConfig VeneerHTTP1" ;;
        VeneerRuntime) echo "VeneerCore VeneerConfig VeneerStores VeneerDecorators VeneerOrigins VeneerServer" ;;
        veneer) echo "VeneerCore VeneerConfig VeneerRuntime" ;;
    esac
}

status=0
for dir in Sources/Veneer* Sources/veneer; do
    module=$(basename "$dir")
    ok=$(allowed "$module")
    for imported in $(grep -rhoE '^(@[A-Za-z_]+(\([A-Za-z]+\))? )*import Veneer[A-Za-z0-9]*' "$dir" | sed 's/.*import //' | sort -u); do
        case " $ok " in
            *" $imported "*) ;;
            *) echo "check-layers: $module imports $imported"; status=1 ;;
        esac
    done
done

if grep -rnE 'FieldLines|FieldLineReader|SerializedFields|HeaderStorage|headers\.wire|serializ|field lines|fieldLines' Sources/VeneerDecorators; then
    echo "check-layers: the decorators above mention the wire representation"
    status=1
fi

if grep -rnE '@_spi' Sources/VeneerCore; then
    echo "check-layers: VeneerCore opens an SPI above; what only Veneer's modules share is package-level"
    status=1
fi

[ "$status" = 0 ] && echo "check-layers: every module imports only the layers below it; the decorators never see the wire; VeneerCore opens no SPI"
exit "$status"
