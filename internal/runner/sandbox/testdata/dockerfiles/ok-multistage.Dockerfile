ARG BASE
FROM $BASE AS build
RUN make
FROM ${BASE}
COPY --from=build /out /out
COPY --from=0 /x /x
ADD local.tar /srv/
